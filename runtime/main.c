/* main.c - placeholder */
#include "runtime/internal.h"
int taprt_main(int argc, char **argv, const taprt_program *p) { (void)argc; (void)argv; (void)p; return 1; }
