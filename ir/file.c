/*
 * file.c - the one way tapc opens the files it reads.
 *
 * Every input kind goes through here: the model, its external data, an IR
 * file and the model and weights it names, a -cluster file, @response
 * files.  The rules (docs/design.md, "Untrusted input"):
 *
 *  - regular files only, opened with O_NONBLOCK, so a FIFO or a device
 *    planted where a file should be is refused instead of blocking us or
 *    feeding /dev/zero without end;
 *  - read into memory only up to a cap the caller gives;
 *  - a path the user typed (dir == NULL) is opened as given, symbolic
 *    links and all: it is theirs.  A path found inside a file (external
 *    data, an IR file's model and weights) is untrusted: it must be
 *    relative, without a ".." component, and is opened component by
 *    component from dir with O_NOFOLLOW, so it can neither
 *    leave dir nor pass through a symbolic link.
 *
 * Errors are not printed here: the caller gets a phrase in `why` and puts
 * it in its own diag line, which names the file, node or tensor.
 *
 * Needs: POSIX openat.  Nothing else of tapc.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/ir.h"

static void
say(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
}

bool
ir_path_inside(const char *path)
{
	if (!*path || path[0] == '/')
		return false;
	for (const char *c = path;; c++) {
		if (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == 0))
			return false;
		if (!(c = strchr(c, '/')))
			return true;
	}
}

/* Open path under dir one component at a time, never following a link;
 * the last component with last_flags.  -1 with why set on failure. */
static int
open_confined(const char *dir, const char *path, int last_flags, const char *noun,
    const char *where, char *why, size_t n)
{
	if (!*path) {
		say(why, n, "%s is empty", noun);
		return -1;
	}
	if (path[0] == '/') {
		say(why, n, "%s '%s' is an absolute path", noun, path);
		return -1;
	}
	if (!ir_path_inside(path)) {
		say(why, n, "%s '%s' leaves %s", noun, path, where);
		return -1;
	}
	char buf[PATH_MAX];
	if (strlen(path) >= sizeof buf) {
		say(why, n, "%s is longer than %d bytes", noun, PATH_MAX - 1);
		return -1;
	}
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		say(why, n, "cannot open directory '%s': %s", dir, strerror(errno));
		return -1;
	}
	strcpy(buf, path);
	for (char *comp = buf;;) {
		char *slash = strchr(comp, '/');
		if (slash)
			*slash = 0;
		int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (slash ? O_DIRECTORY : last_flags);
		int nfd = *comp && strcmp(comp, ".") != 0 ? openat(fd, comp, flags) : dup(fd);
		int err = errno;
		struct stat st;
		/* O_DIRECTORY|O_NOFOLLOW on a link fails with ENOTDIR: tell them apart */
		bool link = nfd < 0 && (err == ELOOP || (err == ENOTDIR &&
		    fstatat(fd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)));
		close(fd);
		if (nfd < 0) {
			if (link)
				say(why, n, "%s '%s' goes through a symbolic link", noun, path);
			else
				say(why, n, "%s '%s': %s", noun, path, strerror(err));
			return -1;
		}
		fd = nfd;
		if (!slash)
			return fd;
		comp = slash + 1;
	}
}

int
ir_file_open(const char *dir, const char *path, const char *noun, const char *where,
    int64_t *size, char *why, size_t n)
{
	int fd;
	if (!dir) {
		fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			say(why, n, "cannot open: %s", strerror(errno));
			return -1;
		}
	} else if ((fd = open_confined(dir, path, O_NONBLOCK, noun, where, why, n)) < 0) {
		return -1;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		if (dir)
			say(why, n, "%s '%s' is not a regular file", noun, path);
		else
			say(why, n, "not a regular file");
		return -1;
	}
	/* reads must block normally from here on (O_NONBLOCK is only for the open) */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	*size = st.st_size;
	return fd;
}

bool
ir_dir_inside(const char *dir, const char *path, const char *noun, const char *where,
    char *why, size_t n)
{
	int fd = open_confined(dir, path, O_DIRECTORY, noun, where, why, n);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

char *
ir_file_read(const char *dir, const char *path, const char *noun, const char *where,
    int64_t cap, size_t *len, char *why, size_t n)
{
	int64_t size;
	int fd = ir_file_open(dir, path, noun, where, &size, why, n);
	if (fd < 0)
		return NULL;
	if (size > cap) {
		close(fd);
		say(why, n, "is %lld bytes, over the limit of %lld bytes", (long long)size, (long long)cap);
		return NULL;
	}
	/* the size may be 0 (/proc) or grow while we read: the cap holds anyway */
	size_t have = 0, room = size > 0 ? (size_t)size + 1 : 4096;
	char *buf = malloc(room + 1);
	if (!buf)
		die("out of memory");
	for (;;) {
		if (have == room) {
			if ((int64_t)room > cap) {
				free(buf);
				close(fd);
				say(why, n, "is over the limit of %lld bytes", (long long)cap);
				return NULL;
			}
			room *= 2;
			if (!(buf = realloc(buf, room + 1)))
				die("out of memory");
		}
		ssize_t r = read(fd, buf + have, room - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int err = errno;
			free(buf);
			close(fd);
			say(why, n, "cannot read: %s", strerror(err));
			return NULL;
		}
		if (r == 0)
			break;
		have += (size_t)r;
	}
	close(fd);
	if ((int64_t)have > cap) {
		free(buf);
		say(why, n, "is over the limit of %lld bytes", (long long)cap);
		return NULL;
	}
	buf[have] = 0;
	*len = have;
	return buf;
}
