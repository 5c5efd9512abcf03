/* meridian-adopt: after a job aggregated on several nodes, puts each node shard on the
 * reference aggregator's timebase record so that `meridian merge` accepts it
 * (mrd_uplink_adopt in record.c says what is checked and written).
 *
 * Usage: meridian-adopt REFERENCE.db NODE.db...
 * Exit status: 0 every node shard adopted (or already), 1 one was refused or failed (the
 * others are still done), 2 usage. Main thread; one shard at a time.
 */
#include <stdio.h>
#include <string.h>

#include "uplink.h"

int main(int argc, char **argv)
{
    if (argc < 3 || strcmp(argv[1], "--help") == 0) {
        fputs("usage: meridian-adopt REFERENCE.db NODE.db...\n"
              "\n"
              "Each NODE.db is the shard of a meridiand started with --clock-reference (it\n"
              "stamped its global times on the reference aggregator's timebase and recorded\n"
              "node_clock.<shard>.* rows). Its runs row takes the anchors and boot id of\n"
              "REFERENCE.db (the reference aggregator's database), so that\n"
              "`meridian merge -o OUT REFERENCE.db NODE.db...` copies its times unchanged.\n"
              "A shard of another run, or one without an alignment record, is refused and\n"
              "left as it was. Exit status: 0, 1 some shard refused or failed, 2 usage.\n",
              argc < 3 ? stderr : stdout);
        return argc < 3 ? 2 : 0;
    }
    int bad = 0;
    for (int i = 2; i < argc; i++)
        if (mrd_uplink_adopt(argv[1], argv[i], stderr) < 0)
            bad = 1;
    return bad;
}
