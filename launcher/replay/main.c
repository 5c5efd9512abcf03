/* meridian-replay: standalone driver of the load generator (the same code as `meridian
 * replay`), kept so tests and benchmarks do not depend on the CLI dispatcher. */
#include "replay.h"

int main(int argc, char **argv)
{
    return mrd_replay_main(argc, argv);
}
