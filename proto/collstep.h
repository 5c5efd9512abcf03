/* Steps counted from a collective: the rule every rank applies alike, for jobs without NVTX
 * step ranges (MERIDIAN_STEP_COLLECTIVE, `meridian profile --step-collective`).
 *
 * Where it sits: the agent's NCCL plugin (agent/capture/collsteps.c) feeds it every
 * collective of one communicator; `meridian profile` parses the specification with the same
 * code before the job starts, so a bad one is refused there, not on every rank afterwards.
 *
 * Specification:
 *   FUNC[/N][@COMM]   every N-th FUNC (an NCCL function name, e.g. AllReduce; N >= 1,
 *                     default 1) on communicator COMM begins a step: the collectives whose
 *                     sequence number s has s % N == 0.
 *   auto[@COMM]       the DDP rule below, over COMM's AllReduces.
 *   COMM              "world" (default): the first communicator initialised whose size is the
 *                     job's world size (any size when the world size is unknown); a name
 *                     (NCCL's commName, compared exactly); or 0xHEX, the communicator's hash.
 *   "" / unset        no collective steps: NVTX step ranges as before.
 * While a collective rule is set it is the only step source: NVTX ranges are not counted as
 * steps (switching sources part-way would renumber steps, and two ranks would switch at
 * different collectives).
 *
 * Why every rank gets the same numbers, without any timing: NCCL gives a collective the
 * same sequence number on every rank of its communicator (per communicator and function),
 * with the same function, count and datatype; the communicator's hash is the same on every
 * rank, and communicators spanning the whole job are created collectively, in one order, on
 * every rank. Every decision below is a pure function of that sequence.
 *
 * The DDP rule ("auto"): PyTorch's DDP issues, each iteration, the same k bucket
 * AllReduces (sizes set by the bucket layout, which DDP rebuilds once after the first
 * iteration), sometimes after a broadcast of buffers. Let x(s) be the (count, datatype) of
 * AllReduce s. At each AllReduce, for every period P in 1..MRD_COLLSTEP_PERIOD_MAX, the
 * detector keeps the length L(P) of the run of consecutive AllReduces ending here that
 * repeat the one P earlier; the periodic suffix is then L(P) + P long. The rule locks on
 * the smallest P whose suffix reaches max(MRD_COLLSTEP_REPEATS x P, MRD_COLLSTEP_SPAN_MIN)
 * (three full repetitions, and at least 12 AllReduces so that equal-sized buckets inside
 * one iteration are not taken for the period). The phase: the periodic suffix starts at
 * AllReduce a; steps begin at the AllReduces a + jP after the lock (step 0 at the first
 * such one after the one that locked). With DDP's rebuilt buckets, a is the first bucket of
 * the second iteration, so a step is an iteration from its first bucket; if the first
 * iteration's tail happens to repeat the new layout, a moves into that tail and steps begin
 * at a fixed bucket inside the iteration (still one step per iteration, the same on every
 * rank). A gap in the sequence numbers starts the detection again (before a lock).
 * Limits: a period over MRD_COLLSTEP_PERIOD_MAX AllReduces, or an iteration whose AllReduces
 * differ from one iteration to the next (e.g. a metric all-reduced every 10 steps), is not
 * found (no step is counted; the agent's counter collstep/period stays 0): name the
 * collective then (e.g. "AllReduce/12" or "Broadcast"). The search costs ~0.5 us per AllReduce
 * (up to 128 compares) and stops after MRD_COLLSTEP_SEARCH_MAX AllReduces without a period
 * (counted over the whole sequence, so every rank stops at the same one); after a lock a
 * feed is one modulo.
 *
 * Workload: one feed per collective of the step communicator (MRD_COLLSTEP_PERIOD_MAX
 * compares at most until the lock or the end of the search, then one modulo). Pure
 * functions, no allocation, no logging; the caller serialises feeds of one detector.
 */
#ifndef MRD_COLLSTEP_H
#define MRD_COLLSTEP_H

#include <stddef.h>
#include <stdint.h>

#define MRD_COLLSTEP_PERIOD_MAX 128   /* AllReduces in one period, at most */
#define MRD_COLLSTEP_REPEATS    3     /* repetitions of the period before it locks */
#define MRD_COLLSTEP_SPAN_MIN   12    /* AllReduces the repetitions cover, at least */
#define MRD_COLLSTEP_SEARCH_MAX 65536 /* AllReduces searched for a period, at most */
#define MRD_COLLSTEP_RING_MASK  255   /* the detector keeps the last 256 keys */
#define MRD_COLLSTEP_FUNC_MAX   32
#define MRD_COLLSTEP_NAME_MAX   64

enum mrd_collstep_mode { MRD_COLLSTEP_OFF = 0, MRD_COLLSTEP_EXPLICIT = 1, MRD_COLLSTEP_AUTO = 2 };
enum mrd_collstep_comm { MRD_COLLSTEP_WORLD = 0, MRD_COLLSTEP_NAMED = 1, MRD_COLLSTEP_HASH = 2 };

struct mrd_collstep_rule {
    int mode;                         /* enum mrd_collstep_mode */
    char func[MRD_COLLSTEP_FUNC_MAX]; /* EXPLICIT: the function; AUTO: "AllReduce" */
    uint64_t every;                   /* EXPLICIT: N */
    int comm;                         /* enum mrd_collstep_comm */
    char comm_name[MRD_COLLSTEP_NAME_MAX];
    uint64_t comm_hash;
};

/* Parses a specification (above) into *r. Returns 0 (NULL or "" give mode OFF), or -EINVAL
 * with why[] saying what is wrong and what would do (e.g. "N must be a whole number from 1
 * to 1000000, not \"0\""). */
int mrd_collstep_parse(const char *spec, struct mrd_collstep_rule *r, char *why, size_t why_len);

/* The rule in its canonical text (for logs). */
void mrd_collstep_format(const struct mrd_collstep_rule *r, char *out, size_t n);

/* 1 when `func` (NCCL's name) is the rule's function. */
int mrd_collstep_func_is(const struct mrd_collstep_rule *r, const char *func);

/* The DDP rule's detector (zero-initialised, or mrd_collstep_detect_reset). */
struct mrd_collstep_detect {
    uint64_t next_seq;                         /* the sequence number expected next */
    uint64_t n;                                /* AllReduces fed since the last reset */
    uint64_t fed;                              /* AllReduces fed in all (not reset) */
    uint64_t key[MRD_COLLSTEP_RING_MASK + 1];  /* ring: x(s) of the last 256 */
    uint32_t run[MRD_COLLSTEP_PERIOD_MAX + 1]; /* L(P) */
    uint64_t period;                           /* 0 until locked */
    uint64_t anchor;                           /* a: sequence number the periods count from */
    uint64_t first_step_seq;                   /* the AllReduce that begins step 0 */
};

void mrd_collstep_detect_reset(struct mrd_collstep_detect *d);

/* The key of one collective: its count and datatype name (NULL is a datatype too). */
uint64_t mrd_collstep_key(uint64_t count, const char *datatype);

/* Feeds AllReduce `seq` with key `key`. Returns 1 when it begins a step (only after the
 * lock), else 0. */
int mrd_collstep_detect_feed(struct mrd_collstep_detect *d, uint64_t seq, uint64_t key);

#endif
