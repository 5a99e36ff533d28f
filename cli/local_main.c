/* ixia-local: starts and stops the ixia stack on one machine (local.c). */
#include "local.h"

int main(int argc, char **argv) { return ixia_local_main(argc, argv); }
