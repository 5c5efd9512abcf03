/* Which CUDA API callbacks a window's close turns on (capture-internal).
 *
 * A steady-tier window closes at the pop of its last step (window.h): from then on the
 * first CUDA API entry gives the correlation boundary (records of launches at or after it
 * belong to later steps) and, after the forced flush, an API exit finalizes CUPTI. Only
 * the calls whose records the window stores need to be seen for that: with the default
 * trace kinds (kernel, graph, nccl) the launches, with memcpy or memset traced the copies
 * and sets too. Enabling those callbacks one by one (a few dozen of CUPTI's ~1,330 runtime
 * and driver callbacks) replaces enabling the two whole domains, which cost ~0.3 ms a
 * window on an H200 inside the application's last window step and put a callback on every
 * CUDA call of the step after it (tests/bench/overhead/RESULTS-tiers.md, session 21).
 *
 * The callbacks are chosen by their names in the CUPTI the process runs with
 * (cuptiGetCallbackName), not by a list compiled in, so launch entry points a newer CUDA
 * adds (CUDA 13's __cudaLaunchKernel) are found: a name containing "Launch" is a launch,
 * "Memcpy" a copy, "Memset" a set. The names are read once, at the first attach (an edge
 * step that already costs ~12 ms; CUPTI is attached then), and kept.
 */
#ifndef MRD_CAPTURE_CLOSE_CBIDS_H
#define MRD_CAPTURE_CLOSE_CBIDS_H

#include <cupti.h>

enum {
    MRD_CLOSE_LAUNCH = 1 << 0,
    MRD_CLOSE_MEMCPY = 1 << 1,
    MRD_CLOSE_MEMSET = 1 << 2,
};

/* Reads the callbacks' names (once; later calls return at once); with `print`, lists the
 * launch callbacks found on stderr, once (MERIDIAN_PRINT_KINDS=1). Called by the thread
 * attaching a window, while CUPTI is attached. */
void mrd__close_cbids_prepare(int print);

/* Enables, for subscriber `sub`, every runtime and driver API callback whose name puts it
 * in one of `classes` (MRD_CLOSE_*). Returns how many it enabled, or -1 when none was found
 * or CUPTI refused one: the caller then enables the two whole domains (a superset, so the
 * callbacks already on do no harm). Called only by the thread closing a window, while
 * CUPTI is attached; never concurrently with itself. */
int mrd__close_enable_cbids(CUpti_SubscriberHandle sub, unsigned classes);

#endif
