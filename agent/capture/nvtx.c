/* NVTX capture: meridian as the NVTX injection library (InitializeInjectionNvtx2).
 *
 * Where this sits: the launcher sets NVTX_INJECTION64_PATH=/abs/libmeridian.so. The first
 * NVTX call made by any NVTX client in the process dlopens that path (the agent instance
 * CUDA and NCCL already loaded) and calls InitializeInjectionNvtx2(getExportTable); we
 * write our functions into the client's function-pointer tables through its export
 * table (NVTX_ETID_CALLBACKS -> GetModuleFunctionTable, modules CORE and CORE2).
 *
 * Why this and not CUPTI's MARKER kind: with NVTX v3 (header-only, what PyTorch 2.x built
 * for CUDA 13 uses: torch/csrc/cuda/shared/nvtx.cpp includes nvtx3 and binds
 * nvtxRangePushA / nvtxRangePop / nvtxRangeStartA / nvtxRangeEnd / nvtxMarkA), every
 * shared object that uses NVTX carries its own private copy of NVTX's state (libtorch's
 * Python bindings, NCCL, cuDNN, ...). Each copy initialises on its own first call and asks
 * the injection library to fill its own tables, so InitializeInjectionNvtx2 runs once per
 * copy. An injection that only serves the first caller (or one that is not loaded or not
 * ready when torch's copy initialises) sees NCCL's ranges and none of torch's; CUPTI 13.0's
 * NVTX path also has known faults (NVIDIA/NVTX#125). This file serves every copy, every
 * time, and the test tests/capture/test_nvtx_multi.c proves it with two separately
 * built NVTX v3 clients.
 *
 * What is recorded (MRD_EV_NVTX): push/pop ranges and start/end ranges as one event at
 * pop/end; marks; for every domain call its domain name (str[0]; NULL = default domain);
 * the message copied (truncated) into inline_str, or a registered string in str[1]; the
 * ARGB color. nvtxNameOsThread becomes a mark in domain "meridian.thread_name" whose name
 * is the thread's name and whose thread is the named thread.
 *
 * Hot path (application threads): a per-thread stack of NVTX_DEPTH frames holds open
 * push/pop ranges (start time, domain, message copy), in the thread's capture state (its
 * ring's state area, capture.h; not __thread: that would make glibc malloc ~3 KB on the
 * thread's first NVTX call); start/end ranges, which may end on another thread, live in a
 * shared table of RANGE_SLOTS slots claimed by compare-and-swap. A thread that gets no
 * ring (more threads than MERIDIAN_RING_THREADS) has no stack: its pushes are counted as
 * MRD_DROP_NO_THREAD_SLOT, as its other records are (its marks too, without asking for its
 * thread id: no gettid per call). Each entry point looks the thread's ring up once and
 * writes through that state (mrd_ring_write_in), not through a second lookup.
 * Caps and policies: a push beyond NVTX_DEPTH, or a start with no free slot, is not
 * recorded and counted as MRD_DROP_NVTX_CAP ("nvtx_cap": the ring was not full, the
 * agent's NVTX bookkeeping was); pops still balance. Domains and registered strings are
 * copied once into a fixed arena (ARENA_BYTES); when it is full, registration returns NULL
 * (names then read as empty).
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <stdatomic.h>
#include <string.h>
#include <wchar.h>

#include "agent.h"
#include "capture.h"
#include "ring.h"
#include "window.h"

#define MRD_EXPORT __attribute__((visibility("default")))

#define NVTX_DEPTH     MRD_NVTX_DEPTH
#define RANGE_SLOTS    1024
#define RANGE_PROBES   16
#define ARENA_BYTES    (256 * 1024)
#define NAME_MAX_BYTES 256

MRD_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table);

struct range_slot {
    _Atomic uint64_t id; /* 0 free, ~0 being filled, else the range id */
    int64_t start;
    const char *domain;
    uint32_t color, thread;
    struct mrd__nvtx_msg m;
};

static struct range_slot ranges[RANGE_SLOTS];
static _Atomic uint64_t range_cursor, range_seq;
static char arena[ARENA_BYTES];
static _Atomic size_t arena_used;
static _Atomic uint64_t inits; /* InitializeInjectionNvtx2 calls served (one per client) */
static const char thread_name_domain[] = "meridian.thread_name";

/* ---- strings ---------------------------------------------------------------------- */

/* Encodes a UTF-32 wchar_t string as UTF-8 into dst (cap bytes, NUL-terminated), whole
 * characters only. */
static void wide_to_utf8(const wchar_t *w, char *dst, size_t cap)
{
    size_t n = 0;
    for (; w && *w; w++) {
        uint32_t c = (uint32_t)*w;
        char b[4];
        size_t k;
        if (c < 0x80) {
            b[0] = (char)c, k = 1;
        } else if (c < 0x800) {
            b[0] = (char)(0xC0 | (c >> 6)), b[1] = (char)(0x80 | (c & 0x3F)), k = 2;
        } else if (c < 0x10000) {
            b[0] = (char)(0xE0 | (c >> 12)), b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            b[2] = (char)(0x80 | (c & 0x3F)), k = 3;
        } else if (c < 0x110000) {
            b[0] = (char)(0xF0 | (c >> 18)), b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            b[2] = (char)(0x80 | ((c >> 6) & 0x3F)), b[3] = (char)(0x80 | (c & 0x3F)), k = 4;
        } else {
            b[0] = '?', k = 1;
        }
        if (n + k >= cap)
            break;
        memcpy(dst + n, b, k);
        n += k;
    }
    dst[n] = '\0';
}

static void ascii_copy(const char *s, char *dst)
{
    mrd__capture_copy_str(dst, MRD_RECORD_INLINE_STR, s);
}

/* Copies s (at most NAME_MAX_BYTES - 1 bytes) into the arena; NULL when the arena is full. */
static const char *arena_copy(const char *s)
{
    size_t n = s ? strnlen(s, NAME_MAX_BYTES - 1) : 0;
    size_t at = atomic_fetch_add(&arena_used, n + 1);
    if (at + n + 1 > ARENA_BYTES)
        return NULL;
    memcpy(arena + at, s ? s : "", n);
    arena[at + n] = '\0';
    return arena + at;
}

static const char *arena_copy_wide(const wchar_t *w)
{
    char buf[NAME_MAX_BYTES];
    wide_to_utf8(w, buf, sizeof(buf));
    return arena_copy(buf);
}

/* An ASCII / a wide string as the message m; returns m. */
static const struct mrd__nvtx_msg *msg_a(struct mrd__nvtx_msg *m, const char *s)
{
    m->reg = NULL;
    ascii_copy(s, m->text);
    return m;
}

static const struct mrd__nvtx_msg *msg_w(struct mrd__nvtx_msg *m, const wchar_t *s)
{
    m->reg = NULL;
    wide_to_utf8(s, m->text, sizeof(m->text));
    return m;
}

/* The message of an event attribute structure (older, shorter structures: none). */
static void attr_msg(const nvtxEventAttributes_t *a, struct mrd__nvtx_msg *m, uint32_t *color)
{
    m->reg = NULL;
    m->text[0] = '\0';
    *color = 0;
    if (!a)
        return;
    if (a->size >= offsetof(nvtxEventAttributes_t, color) + sizeof(a->color) &&
        a->colorType == NVTX_COLOR_ARGB)
        *color = a->color;
    if (a->size < offsetof(nvtxEventAttributes_t, message) + sizeof(a->message))
        return;
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
        ascii_copy(a->message.ascii, m->text);
        break;
    case NVTX_MESSAGE_TYPE_UNICODE:
        wide_to_utf8(a->message.unicode, m->text, sizeof(m->text));
        break;
    case NVTX_MESSAGE_TYPE_REGISTERED:
        m->reg = (const char *)a->message.registered;
        break;
    default:
        break;
    }
}

/* ---- records ---------------------------------------------------------------------- */

/* Writes one NVTX record into the ring of t, the calling thread's capture state (looked up
 * once by the caller; NULL: no ring, the record is dropped and counted as no_thread_slot). */
static void emit(struct mrd__capture_thread *t, uint32_t kind, int64_t start, int64_t end,
                 const char *domain, const struct mrd__nvtx_msg *m, uint32_t color, uint32_t thread,
                 uint32_t depth)
{
    struct mrd_record r;
    memset(&r, 0, sizeof(r));
    r.kind = MRD_EV_NVTX;
    r.str[0] = domain;
    r.str[1] = m->reg;
    memcpy(r.inline_str, m->text, sizeof(r.inline_str));
    r.ev.nvtx.start = start;
    r.ev.nvtx.end = end;
    r.ev.nvtx.kind = kind;
    r.ev.nvtx.thread = thread;
    r.ev.nvtx.depth = depth;
    r.ev.nvtx.color = color;
    mrd_ring_write_in(t, &r);
}

static void mark(const char *domain, const struct mrd__nvtx_msg *m, uint32_t color)
{
    if (!mrd_agent_active())
        return;
    struct mrd__capture_thread *t = mrd__capture_thread();
    int64_t now = mrd_clock_now();
    /* no ring: no thread id either (a gettid per mark for nothing), the drop is counted */
    emit(t, MRD_NVTX_MARK, now, now, domain, m, color, t ? mrd__capture_tid_in(t) : 0, 0);
}

static int push_body(struct mrd__capture_thread *t, const char *domain,
                     const struct mrd__nvtx_msg *m, uint32_t color);

static int push(const char *domain, const struct mrd__nvtx_msg *m, uint32_t color)
{
    if (!mrd_agent_active())
        return 0;
    struct mrd__capture_thread *t = mrd__capture_thread();
    int64_t c0 = mrd__cost_begin(t);
    int r = push_body(t, domain, m, color);
    mrd__cost_end(c0);
    return r;
}

static int push_body(struct mrd__capture_thread *t, const char *domain,
                     const struct mrd__nvtx_msg *m, uint32_t color)
{
    if (t == NULL) { /* no ring for this thread: nothing it writes is kept either */
        mrd_agent_count_drop(MRD_DROP_NO_THREAD_SLOT, 1);
        return 0;
    }
    if (t->nvtx_depth >= NVTX_DEPTH) {
        t->nvtx_overflow++;
        mrd_agent_count_drop(MRD_DROP_NVTX_CAP, 1);
        return (int)(t->nvtx_depth + t->nvtx_overflow - 1);
    }
    struct mrd__nvtx_frame *f = &t->nvtx[t->nvtx_depth];
    f->domain = domain;
    f->color = color;
    f->m = *m;
    /* a step (steady tier) may attach CUPTI here: before the step's start time is taken */
    f->step_tag = mrd__window_step_push(m->reg ? m->reg : m->text);
    f->start = mrd_clock_now();
    return (int)t->nvtx_depth++;
}

static int pop_body(struct mrd__capture_thread *t, const char *domain);

static int pop(const char *domain)
{
    struct mrd__capture_thread *t = mrd__capture_thread();
    if (t == NULL)
        return -1;
    int64_t c0 = mrd__cost_begin(t);
    int r = pop_body(t, domain);
    mrd__cost_end(c0);
    return r;
}

static int pop_body(struct mrd__capture_thread *t, const char *domain)
{
    if (t->nvtx_overflow > 0) {
        t->nvtx_overflow--;
        return (int)(t->nvtx_depth + t->nvtx_overflow);
    }
    int64_t now = mrd_clock_now();
    for (uint32_t i = t->nvtx_depth; i-- > 0;) {
        struct mrd__nvtx_frame *f = &t->nvtx[i];
        if (f->domain != domain)
            continue;
        if (mrd_agent_active())
            emit(t, MRD_NVTX_PUSHPOP, f->start, now, domain, &f->m, f->color,
                 mrd__capture_tid_in(t), i);
        if (f->step_tag)
            mrd__window_step_pop(f->step_tag, now - f->start);
        memmove(f, f + 1, (t->nvtx_depth - i - 1) * sizeof(*f));
        t->nvtx_depth--;
        return (int)i;
    }
    return -1; /* NVTX: negative when there was no open range */
}

static nvtxRangeId_t range_start(const char *domain, const struct mrd__nvtx_msg *m, uint32_t color)
{
    if (!mrd_agent_active())
        return 0;
    uint64_t at = atomic_fetch_add_explicit(&range_cursor, 1, memory_order_relaxed);
    for (unsigned p = 0; p < RANGE_PROBES; p++) {
        size_t i = (size_t)((at + p) % RANGE_SLOTS);
        struct range_slot *s = &ranges[i];
        uint64_t expect = 0;
        if (!atomic_compare_exchange_strong(&s->id, &expect, UINT64_MAX))
            continue;
        uint64_t seq = atomic_fetch_add_explicit(&range_seq, 1, memory_order_relaxed) + 1;
        uint64_t id = (seq << 10) | i; /* RANGE_SLOTS == 1 << 10 */
        s->start = mrd_clock_now();
        s->domain = domain;
        s->color = color;
        s->thread = mrd__capture_tid();
        s->m = *m;
        atomic_store_explicit(&s->id, id, memory_order_release);
        return id;
    }
    mrd_agent_count_drop(MRD_DROP_NVTX_CAP, 1);
    return 0;
}

static void range_end(nvtxRangeId_t id)
{
    if (id == 0 || id == UINT64_MAX)
        return;
    struct range_slot *s = &ranges[id % RANGE_SLOTS];
    if (atomic_load_explicit(&s->id, memory_order_acquire) != id)
        return;
    if (mrd_agent_active())
        emit(mrd__capture_thread(), MRD_NVTX_STARTEND, s->start, mrd_clock_now(), s->domain, &s->m,
             s->color, s->thread, 0);
    uint64_t expect = id;
    atomic_compare_exchange_strong(&s->id, &expect, 0);
}

_Static_assert(RANGE_SLOTS == 1 << 10, "range ids keep the slot in their low 10 bits");

/* ---- NVTX entry points ----------------------------------------------------------- */

static const char *dom(nvtxDomainHandle_t d)
{
    return (const char *)d;
}

/* Marks, range starts and pushes each come in four message forms: event attributes (Ex:
 * message and colour), an ASCII (A) and a wide (W) string, all in the default domain
 * (CORE module), and event attributes in a domain of the client's (CORE2 module).
 * MESSAGE_FORMS(ret, op, give) defines op_ex, op_a, op_w and domain_op_ex: each makes
 * its argument a message and a colour and calls op(domain, message, colour); give is
 * `return` where op's result is NVTX's result, `(void)` where NVTX expects none. */
#define MESSAGE_FORMS(ret, op, give)                                                               \
    static ret NVTX_API op##_ex(const nvtxEventAttributes_t *a)                                    \
    {                                                                                              \
        struct mrd__nvtx_msg m;                                                                    \
        uint32_t color;                                                                            \
        attr_msg(a, &m, &color);                                                                   \
        give op(NULL, &m, color);                                                                  \
    }                                                                                              \
    static ret NVTX_API op##_a(const char *s)                                                      \
    {                                                                                              \
        struct mrd__nvtx_msg m = {NULL, ""};                                                       \
        give op(NULL, msg_a(&m, s), 0);                                                            \
    }                                                                                              \
    static ret NVTX_API op##_w(const wchar_t *s)                                                   \
    {                                                                                              \
        struct mrd__nvtx_msg m = {NULL, ""};                                                       \
        give op(NULL, msg_w(&m, s), 0);                                                            \
    }                                                                                              \
    static ret NVTX_API domain_##op##_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t *a)     \
    {                                                                                              \
        struct mrd__nvtx_msg m;                                                                    \
        uint32_t color;                                                                            \
        attr_msg(a, &m, &color);                                                                   \
        give op(dom(d), &m, color);                                                                \
    }

/* `return` is an argument of these three, not a statement */
/* clang-format off */
MESSAGE_FORMS(void, mark, (void))
MESSAGE_FORMS(nvtxRangeId_t, range_start, return)
MESSAGE_FORMS(int, push, return)
/* clang-format on */

static void NVTX_API range_end_fn(nvtxRangeId_t id)
{
    range_end(id);
}

static int NVTX_API pop_fn(void)
{
    return pop(NULL);
}

static void name_thread(uint32_t tid, const struct mrd__nvtx_msg *m)
{
    if (!mrd_agent_active())
        return;
    int64_t now = mrd_clock_now();
    emit(mrd__capture_thread(), MRD_NVTX_MARK, now, now, thread_name_domain, m, 0, tid, 0);
}

static void NVTX_API name_os_thread_a(uint32_t tid, const char *name)
{
    struct mrd__nvtx_msg m = {NULL, ""};
    name_thread(tid, msg_a(&m, name));
}

static void NVTX_API name_os_thread_w(uint32_t tid, const wchar_t *name)
{
    struct mrd__nvtx_msg m = {NULL, ""};
    name_thread(tid, msg_w(&m, name));
}

static void NVTX_API domain_range_end(nvtxDomainHandle_t d, nvtxRangeId_t id)
{
    (void)d;
    range_end(id);
}

static int NVTX_API domain_pop(nvtxDomainHandle_t d)
{
    return pop(dom(d));
}

static nvtxStringHandle_t NVTX_API register_string_a(nvtxDomainHandle_t d, const char *s)
{
    (void)d;
    return (nvtxStringHandle_t)arena_copy(s);
}

static nvtxStringHandle_t NVTX_API register_string_w(nvtxDomainHandle_t d, const wchar_t *s)
{
    (void)d;
    return (nvtxStringHandle_t)arena_copy_wide(s);
}

static nvtxDomainHandle_t NVTX_API domain_create_a(const char *name)
{
    return (nvtxDomainHandle_t)arena_copy(name);
}

static nvtxDomainHandle_t NVTX_API domain_create_w(const wchar_t *name)
{
    return (nvtxDomainHandle_t)arena_copy_wide(name);
}

static void NVTX_API domain_destroy(nvtxDomainHandle_t d)
{
    (void)d; /* names stay in the arena: records already written point at them */
}

/* ---- injection -------------------------------------------------------------------- */

struct slot_fn {
    unsigned cbid;
    NvtxFunctionPointer fn;
};

#define FN(f) ((NvtxFunctionPointer)(void (*)(void))(f))

/* The mark and range calls, which both modules serve: CORE in the default domain, CORE2 in
 * a domain of the client's. FORMS(Name, op) gives the rows of a call with a message (the
 * functions of MESSAGE_FORMS), PLAIN(Name, op) the row of one without. */
#define MARK_AND_RANGE_SLOTS(FORMS, PLAIN)                                                         \
    FORMS(Mark, mark), FORMS(RangeStart, range_start), PLAIN(RangeEnd, range_end),                 \
        FORMS(RangePush, push), PLAIN(RangePop, pop)

/* CORE's rows: a call with a message has three (Ex, A and W), one without is op_fn. */
/* clang-format off */
#define CORE_FORM_SLOTS(Name, op)                                                                  \
    {NVTX_CBID_CORE_##Name##Ex, FN(op##_ex)},                                                      \
    {NVTX_CBID_CORE_##Name##A, FN(op##_a)},                                                        \
    {NVTX_CBID_CORE_##Name##W, FN(op##_w)}
#define CORE_SLOT(Name, op) {NVTX_CBID_CORE_##Name, FN(op##_fn)}
/* CORE2's rows: DomainEx for a call with a message, domain_op for one without. */
#define CORE2_FORM_SLOT(Name, op) {NVTX_CBID_CORE2_Domain##Name##Ex, FN(domain_##op##_ex)}
#define CORE2_SLOT(Name, op) {NVTX_CBID_CORE2_Domain##Name, FN(domain_##op)}
/* clang-format on */

static const struct slot_fn core_fns[] = {
    MARK_AND_RANGE_SLOTS(CORE_FORM_SLOTS, CORE_SLOT),
    {NVTX_CBID_CORE_NameOsThreadA, FN(name_os_thread_a)},
    {NVTX_CBID_CORE_NameOsThreadW, FN(name_os_thread_w)},
};

static const struct slot_fn core2_fns[] = {
    MARK_AND_RANGE_SLOTS(CORE2_FORM_SLOT, CORE2_SLOT),
    {NVTX_CBID_CORE2_DomainRegisterStringA, FN(register_string_a)},
    {NVTX_CBID_CORE2_DomainRegisterStringW, FN(register_string_w)},
    {NVTX_CBID_CORE2_DomainCreateA, FN(domain_create_a)},
    {NVTX_CBID_CORE2_DomainCreateW, FN(domain_create_w)},
    {NVTX_CBID_CORE2_DomainDestroy, FN(domain_destroy)},
};

/* Writes fns into the client's table for module m. Returns the number written. */
static unsigned fill(const NvtxExportTableCallbacks *cb, NvtxCallbackModule m,
                     const struct slot_fn *fns, size_t n)
{
    NvtxFunctionTable table = NULL;
    unsigned size = 0, done = 0;
    if (!cb->GetModuleFunctionTable(m, &table, &size) || !table)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (fns[i].cbid < size && table[fns[i].cbid]) {
            *table[fns[i].cbid] = fns[i].fn;
            done++;
        }
    }
    return done;
}

/* Called by each NVTX client (each shared object carrying NVTX v3 state, or the NVTX v2
 * libnvToolsExt) on its first NVTX call, on that caller's thread. Returns 1 when our
 * functions were installed, 0 to leave the client's NVTX calls as no-ops (agent inert or
 * an export table we cannot use). */
MRD_EXPORT int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    if (!get_export_table || !mrd_agent_start())
        return 0;
    mrd__capture_pin(); /* NVTX dlcloses an injection whose init returns 0 */
    const NvtxExportTableCallbacks *cb = get_export_table(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof(*cb) || !cb->GetModuleFunctionTable)
        return 0;
    unsigned n = fill(cb, NVTX_CB_MODULE_CORE, core_fns, sizeof(core_fns) / sizeof(core_fns[0]));
    n += fill(cb, NVTX_CB_MODULE_CORE2, core2_fns, sizeof(core2_fns) / sizeof(core2_fns[0]));
    if (n == 0)
        return 0;
    const NvtxExportTableVersionInfo *v = get_export_table(NVTX_ETID_VERSIONINFO);
    if (v && v->struct_size >= sizeof(*v) && v->SetInjectionNvtxVersion)
        v->SetInjectionNvtxVersion(NVTX_VERSION);
    atomic_fetch_add(&inits, 1);
    return 1;
}

uint64_t mrd__nvtx_clients(void)
{
    return atomic_load(&inits);
}
