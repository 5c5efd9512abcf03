/* Capture-internal interface shared by the capture sources (CUPTI, NCCL plugin, NVTX, MPI
 * bridge). Nothing here is exported from libmeridian.so (the version script keeps the
 * mrd__ names local); tests link the capture objects statically and may call these.
 *
 * Where this sits: capture code runs on the application's, CUDA's and NCCL's threads,
 * fills a struct mrd_record on the stack and hands it to mrd_ring_write (agent/ring).
 * The helpers below are hot-path safe: no lock, no allocation, no system call after a
 * thread's first use (mrd__capture_tid caches gettid() per thread). A source that needs
 * its thread's state anyway passes it on to mrd_ring_write_in: one ring lookup per call.
 *
 * Per-thread state: capture code has no __thread variables. In a dlopen'ed library (which
 * the agent always is: CUDA, NCCL and NVTX all dlopen it) glibc allocates a module's TLS
 * block with malloc, possibly under its TLS lock, on each thread's first touch, i.e. on
 * the application's thread inside its first NVTX or NCCL call. Instead, every per-thread
 * variable lives in struct mrd__capture_thread, inside the state area of the ring the
 * thread claims anyway (mrd_ring_thread_state, reached through the ring's pthread key).
 */
#ifndef MRD_CAPTURE_H
#define MRD_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

#include "agent.h"
#include "record.h"
#include "ring.h"

/* Fixed pool sizes of the NCCL plugin (nccl_plugin.c): Coll/P2p ops and KernelCh
 * channels in flight. */
#define MRD_NCCL_OP_SLOTS 8192
#define MRD_NCCL_CH_SLOTS 4096

/* nvtx.c's per-thread push/pop stack: NVTX_DEPTH open ranges, each with its message as
 * NVTX passed it (registered: lives forever; otherwise copied). */
#define MRD_NVTX_DEPTH 32
struct mrd__nvtx_msg {
    const char *reg;
    char text[MRD_RECORD_INLINE_STR];
};
struct mrd__nvtx_frame {
    int64_t start;
    uint64_t step_tag; /* window.c's tag when this range is a step, else 0 */
    const char *domain;
    uint32_t color;
    struct mrd__nvtx_msg m;
};

/* Every per-thread variable of the capture sources (see the top of this file). Zero-filled
 * when the thread claims its ring; only the owning thread reads or writes it. */
struct mrd__capture_thread {
    uint32_t tid;             /* gettid(), 0 until mrd__capture_tid first runs */
    int cupti_pace_stalled;   /* cupti.c: this completion thread's last wait saw no progress */
    uint64_t cupti_pushed_gen; /* cupti.c: attach generation of this thread's pushed external
                                  correlation id (0: none pushed) */
    uint32_t cost_tick;        /* capture.c: callbacks since this thread's last timed one */
    uint64_t nccl_ctx_id;     /* nccl_plugin.c: the communicator context and ... */
    uint64_t nccl_launch_id;  /* ... launch id of this thread's last kernel launch ... */
    int64_t nccl_launch_at;   /* ... and the local time its KernelLaunch event started */
    uint32_t nvtx_depth;      /* nvtx.c: open push/pop ranges recorded in nvtx[] ... */
    uint32_t nvtx_overflow;   /* ... and pushed beyond MRD_NVTX_DEPTH (not recorded) */
    struct mrd__nvtx_frame nvtx[MRD_NVTX_DEPTH];
};

_Static_assert(sizeof(struct mrd__capture_thread) <= MRD_RING_THREAD_STATE_BYTES,
               "the capture state must fit the ring's per-thread area");

/* The calling thread's capture state (claiming its ring if it has none yet), or NULL when
 * there is none: agent not started, fork child, or no free ring. Callers then do without
 * (and count MRD_DROP_NO_THREAD_SLOT where that loses an event). Hot-path safe. */
struct mrd__capture_thread *mrd__capture_thread(void);

/* The agent's own cost on the threads it does not own, sampled: every MRD_COST_EVERY-th
 * NVTX and NCCL callback of a thread is timed (two clock reads); the others cost one
 * increment. The sums travel in the Goodbye (category "agent": callbacks_sampled,
 * callback_sampled_ns, callbacks_est = samples x MRD_COST_EVERY) and the report scales
 * them up. A sample over 1 ms is left out: that is a window's CUPTI attach inside a step's
 * push, reported in the window record itself. Usage: t0 = mrd__cost_begin(t); ...
 * mrd__cost_end(t0). Hot-path safe. */
#define MRD_COST_EVERY 64u
static inline int64_t mrd__cost_begin(struct mrd__capture_thread *t)
{
    if (t == NULL || ++t->cost_tick < MRD_COST_EVERY)
        return 0;
    t->cost_tick = 0;
    return mrd_clock_now();
}
void mrd__cost_end(int64_t t0);

/* Makes this shared object impossible to unload (RTLD_NODELETE), once. NCCL dlcloses
 * its profiler plugin after the last communicator is destroyed, and NVTX dlcloses an
 * injection whose init returned 0: either would unmap the agent under its own threads.
 * Called by those entry points when the agent is active. Not for hot paths. */
void mrd__capture_pin(void);

/* The calling thread's OS thread id (gettid), cached in its capture state after the first
 * call (a system call every time for a thread without one: a source that only needs the
 * id for a record of its own looks the state up itself, writes with mrd_ring_write_in and
 * asks mrd__capture_tid_in only when it has a state). */
uint32_t mrd__capture_tid(void);

/* The same for a caller that already holds its thread's state t (not NULL): saves the
 * lookup of the state. */
uint32_t mrd__capture_tid_in(struct mrd__capture_thread *t);

/* gettid system calls made by the two functions above so far (tests). Any thread. */
uint64_t mrd__capture_gettid_calls(void);

/* Copies at most cap - 1 bytes of s (NULL = empty) into dst, always NUL-terminated (cap
 * > 0). Cuts at a UTF-8 character boundary so a truncated copy stays valid UTF-8. */
void mrd__capture_copy_str(char *dst, size_t cap, const char *s);

/* A capture source's decimal option, read once at its start (not a hot-path helper):
 * *out = the variable's value, dflt when unset or empty. A value that is not a number in
 * lo..hi is said once on stderr ("meridian: NAME=VALUE is not a number in LO..HI; OFF") and
 * returns -EINVAL with *out = dflt: the caller turns off what OFF says (silently ignoring a
 * setting would produce data nobody asked for). Used by cupti.c and gpu_sample.c. */
int mrd__capture_env_uint(const char *name, unsigned dflt, unsigned lo, unsigned hi,
                          const char *off, unsigned *out);

/* A capture source's option that names one of a fixed list (not a hot-path helper):
 * *out = the index in `choices` (NULL-terminated) of the variable's value, -1 when it is
 * unset or empty. Any other value is said once on stderr ("meridian: NAME=VALUE is not A,
 * B or C; OFF") and returns -EINVAL with *out = -1, as mrd__capture_env_uint does. Used by
 * cupti.c (MERIDIAN_CUPTI_API, MERIDIAN_CUPTI_CLOSE, MERIDIAN_CUPTI_ALTERNATE). */
int mrd__capture_env_choice(const char *name, const char *const *choices, const char *off,
                            int *out);

/* CUPTI external correlation for NCCL kernel launches (cupti.c). Push/pop an id of kind
 * CUSTOM2 on the calling thread; no-ops (returning 0) unless this agent owns CUPTI.
 * Hot-path safe apart from the CUPTI call itself. */
int mrd__cupti_extcorr_push(uint64_t id);
int mrd__cupti_extcorr_pop(void);

/* Windows of the steady tier (window.h drives them; cupti.c does the CUPTI side):
 * attach: subscribe, timestamp and buffer callbacks, kinds. Returns 0, -EBUSY when
 * another tool owns CUPTI (said once; no further window should try), or another negative
 * code (CUPTI left detached). The calling application thread pays its cost (~11-12 ms).
 * close: the window's last step ended: the next CUDA API entry on any thread sets the
 * correlation boundary past which records are dropped; 1 when it enabled the API
 * callbacks for that, 0 when there was nothing to close (CUPTI not attached, or the
 * subscribe alternate's cuptiSubscribe refused). Application thread, inside the step the
 * application times: its cost is counted (window/close_ns, window.c).
 * detach_request: CUPTI's helper thread force-flushes, then the next CUDA API exit
 * callback finalizes CUPTI and calls mrd__window_detached. Application thread; cheap. */
int mrd__cupti_attach(void);
/* A communicator of nranks was created (NCCL plugin init): from the first with >= 2 ranks
 * on, the records that link NCCL's launches to their kernels (external correlation and
 * the driver's launch records, trace kind "nccl") are enabled; a process without one
 * never pays for them. Any thread; cold. */
void mrd__cupti_nccl_comm(int nranks);
int mrd__cupti_close(void);
void mrd__cupti_detach_request(void);

/* The CUDA device ordinal current on the calling thread, or -1 when unknown (CUPTI not
 * owned by this agent, or no context). Not for hot paths (asks CUPTI). */
int mrd__cupti_current_device(void);

/* Adds a GPU (CUDA ordinal, PCI bus id) to the NVML sampler (gpu_sample.c), starting it
 * the first time: gpu_sample events from its own thread (1 Hz by default, traced or not,
 * and a reading at each CUPTI attach and, by default, detach); nothing where NVML cannot
 * be loaded. Any thread; not for hot paths (the first call loads NVML). */
void mrd__gpu_sample_add(uint32_t device, const char *pci_bus_id);

/* CUPTI began (1) or stopped (0) tracing in this process (cupti.c: the full tier's set-up,
 * a steady-tier window's attach, its detach): the NVML sampler reads at
 * MERIDIAN_GPU_SAMPLE_HZ while it traces and at MERIDIAN_GPU_SAMPLE_STEADY_HZ otherwise.
 * Any thread; one atomic store. */
void mrd__gpu_sample_tracing(int on);

/* Registers CUDA device ordinal `device` (for the Hello's GPU list and the NVML sampler)
 * from the CUDA driver already loaded in the process (dlopen RTLD_NOLOAD: never loads or
 * links it): the steady tier's source of devices, where no CUPTI DEVICE record comes.
 * Does nothing without a driver answer. Not for hot paths (driver calls, a mutex); any
 * thread (gpu_sample.c). */
void mrd__gpu_from_driver(uint32_t device);

/* The CUDA device of the calling thread's current context, asked of the CUDA driver
 * already loaded (cuCtxGetDevice; never loads or links it), or -1 (no driver, no context).
 * Not for hot paths; any thread (gpu_sample.c). */
int mrd__gpu_driver_device(void);

/* The environment fingerprint (env.c; keys in aggregator/SCHEMA.md). mrd__env_capture:
 * the process's keys (versions, host name, allowlisted variables) the first time, and
 * nccl_version once NCCL is loaded; called where a GPU or a communicator appears, any
 * thread, not for hot paths (allocates, asks the loaded libraries). mrd__env_gpu: the
 * gpu<device>.* keys of one GPU (empty fields and zeros left out), from the NVML sampler's
 * thread. mrd__env_allowed: 1 when variable name[0..len) is fingerprinted (the allowlist,
 * minus names containing TOKEN, KEY, SECRET or PASSWORD in any case); pure. */
struct mrd__gpu_identity {
    char name[96], uuid[96];
    unsigned long long memory_mib;
    unsigned sm_clock_max_mhz, mem_clock_max_mhz;
};
void mrd__env_capture(void);
void mrd__env_gpu(uint32_t device, const struct mrd__gpu_identity *g);
int mrd__env_allowed(const char *name, size_t len);

/* Number of NVTX clients (copies of NVTX state) this agent has served (nvtx.c). */
uint64_t mrd__nvtx_clients(void);

/* Collective steps (collsteps.c; proto/collstep.h's rule). mrd__collsteps_claim: at a
 * communicator's init, 1 when it is the step communicator (claimed once per process), else
 * 0. mrd__collsteps_coll: a Coll start event of that communicator (NCCL's threads; never
 * blocks, allocates or logs). */
struct mrd_nccl_coll_v5;
int mrd__collsteps_claim(uint64_t comm_hash, const char *comm_name, int nranks);
void mrd__collsteps_coll(const struct mrd_nccl_coll_v5 *c);

/* Byte size of an NCCL datatype name ("ncclFloat32" -> 4, "ncclBfloat16" -> 2,
 * "ncclFloat8e4m3" -> 1); 0 for NULL or an unknown name. Pure; any thread. */
uint32_t mrd__nccl_datatype_size(const char *name);

#endif
