/* pbio.c - placeholder */
#include "runtime/internal.h"
