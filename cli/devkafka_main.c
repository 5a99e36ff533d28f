/* ixia-devkafka: the in-memory Kafka cluster for local runs and tests
 * (devkafka.c). Not a production broker. */
#include "devkafka.h"

int main(int argc, char **argv) { return ixia_devkafka_main(argc, argv); }
