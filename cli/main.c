/* ixia: command-line client of the ixia API. The commands live in cli.c. */
#include "cli.h"

int main(int argc, char **argv) { return ixia_cli_main(argc, argv); }
