/* capture_nvtx: the NVTX injection against an NVTX client simulated here.
 *
 * The test plays the NVTX side of the export-table handshake (an export table whose
 * GetModuleFunctionTable hands out tables of pointers to function-pointer slots, as
 * nvtxDetail/nvtxImpl.h does), calls InitializeInjectionNvtx2, then calls the installed
 * functions and checks the records: push/pop nesting and depth, pop by domain, start/end
 * across threads, marks, colors, registered strings, domains, wide strings, truncation at
 * a UTF-8 boundary, thread names, the per-thread depth cap and the start/end table cap
 * (drops counted, pops still balanced), and an inert agent leaving the client untouched.
 */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "capture.h"
#include "check.h"
#include "fake_agent.h"
#include "nvtx_client.h"

static struct nvtx_client cl;
#define CORE(name, type)  NVTX_CORE(&cl, name, type)
#define CORE2(name, type) NVTX_CORE2(&cl, name, type)

static struct mrd_record take_one(void)
{
    struct mrd_record r;
    CHECK_EQ(fake_ring_count(), 1);
    CHECK_EQ(fake_ring_take(&r, 1), 1);
    CHECK_EQ(r.kind, MRD_EV_NVTX);
    return r;
}

static const char *name_of(const struct mrd_record *r)
{
    return r->inline_str[0] ? r->inline_str : r->str[1];
}

static uint32_t tid(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

static void test_handshake(void)
{
    struct nvtx_client inert;
    nvtx_client_init(&inert);
    fake_set_active(0);
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 0);
    for (int i = 0; i < NVTX_CBID_CORE_SIZE; i++)
        CHECK(inert.core[i] == NULL);
    fake_set_active(1);

    nvtx_client_init(&cl);
    uint64_t before = mrd__nvtx_clients();
    CHECK_EQ(InitializeInjectionNvtx2(nvtx_client_export_table), 1);
    CHECK_UEQ(mrd__nvtx_clients(), before + 1);
    int core_ids[] = {
        NVTX_CBID_CORE_MarkEx,       NVTX_CBID_CORE_MarkA,       NVTX_CBID_CORE_MarkW,
        NVTX_CBID_CORE_RangeStartEx, NVTX_CBID_CORE_RangeStartA, NVTX_CBID_CORE_RangeStartW,
        NVTX_CBID_CORE_RangeEnd,     NVTX_CBID_CORE_RangePushEx, NVTX_CBID_CORE_RangePushA,
        NVTX_CBID_CORE_RangePushW,   NVTX_CBID_CORE_RangePop,    NVTX_CBID_CORE_NameOsThreadA,
        NVTX_CBID_CORE_NameOsThreadW};
    for (size_t i = 0; i < sizeof(core_ids) / sizeof(core_ids[0]); i++)
        CHECK(cl.core[core_ids[i]] != NULL);
    CHECK(cl.core[NVTX_CBID_CORE_NameCategoryA] == NULL); /* not implemented: stays no-op */
    CHECK(cl.core2[NVTX_CBID_CORE2_DomainCreateA] != NULL);
    CHECK(cl.core2[NVTX_CBID_CORE2_DomainRangePushEx] != NULL);
    CHECK(cl.core2[NVTX_CBID_CORE2_DomainRegisterStringA] != NULL);
}

static void test_push_pop(void)
{
    fake_clock_set(1000);
    CHECK_EQ(CORE(RangePushA, nvtxRangePushA_impl_fntype)("outer"), 0);
    fake_clock_set(1100);
    CHECK_EQ(CORE(RangePushA, nvtxRangePushA_impl_fntype)("inner"), 1);
    CHECK_EQ(fake_ring_count(), 0); /* a range is one event, written at pop */
    fake_clock_set(1500);
    CHECK_EQ(CORE(RangePop, nvtxRangePop_impl_fntype)(), 1);
    struct mrd_record r = take_one();
    CHECK_EQ(r.ev.nvtx.kind, MRD_NVTX_PUSHPOP);
    CHECK_STREQ(name_of(&r), "inner");
    CHECK(r.str[0] == NULL); /* default domain */
    CHECK_EQ(r.ev.nvtx.start, 1100);
    CHECK_EQ(r.ev.nvtx.end, 1500);
    CHECK_EQ(r.ev.nvtx.depth, 1);
    CHECK_EQ(r.ev.nvtx.thread, tid());
    fake_clock_set(2000);
    CHECK_EQ(CORE(RangePop, nvtxRangePop_impl_fntype)(), 0);
    r = take_one();
    CHECK_STREQ(name_of(&r), "outer");
    CHECK_EQ(r.ev.nvtx.start, 1000);
    CHECK_EQ(r.ev.nvtx.end, 2000);
    CHECK_EQ(r.ev.nvtx.depth, 0);
    CHECK(CORE(RangePop, nvtxRangePop_impl_fntype)() < 0); /* nothing open */
    CHECK_EQ(fake_ring_count(), 0);
    fake_clock_set(-1);
}

static void test_attributes_domains(void)
{
    nvtxDomainHandle_t nccl = CORE2(DomainCreateA, nvtxDomainCreateA_impl_fntype)("NCCL");
    CHECK(nccl != NULL);
    nvtxStringHandle_t reg =
        CORE2(DomainRegisterStringA, nvtxDomainRegisterStringA_impl_fntype)(nccl, "AllReduce");
    CHECK(reg != NULL);

    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0xFF76B900;
    a.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
    a.message.registered = reg;
    CHECK_EQ(CORE2(DomainRangePushEx, nvtxDomainRangePushEx_impl_fntype)(nccl, &a), 0);
    /* A default-domain push in between: popping NCCL pops the NCCL range under it. */
    CHECK_EQ(CORE(RangePushA, nvtxRangePushA_impl_fntype)("step"), 1);
    CHECK_EQ(CORE2(DomainRangePop, nvtxDomainRangePop_impl_fntype)(nccl), 0);
    struct mrd_record r = take_one();
    CHECK_STREQ(r.str[0], "NCCL");
    CHECK_STREQ(r.str[1], "AllReduce");
    CHECK_EQ(r.inline_str[0], '\0');
    CHECK_STREQ(name_of(&r), "AllReduce");
    CHECK_UEQ(r.ev.nvtx.color, 0xFF76B900u);
    CHECK(CORE2(DomainRangePop, nvtxDomainRangePop_impl_fntype)(nccl) < 0);
    CHECK_EQ(CORE(RangePop, nvtxRangePop_impl_fntype)(), 0);
    r = take_one();
    CHECK_STREQ(name_of(&r), "step");
    CHECK(r.str[0] == NULL);

    /* PushEx with an ASCII message and no color. */
    a.colorType = NVTX_COLOR_UNKNOWN;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "forward";
    CHECK_EQ(CORE(RangePushEx, nvtxRangePushEx_impl_fntype)(&a), 0);
    CORE(RangePop, nvtxRangePop_impl_fntype)();
    r = take_one();
    CHECK_STREQ(name_of(&r), "forward");
    CHECK_EQ(r.ev.nvtx.color, 0);

    /* Domain mark; wide domain names and messages arrive as UTF-8. */
    nvtxDomainHandle_t wd = CORE2(DomainCreateW, nvtxDomainCreateW_impl_fntype)(L"daten\u00fc");
    a.messageType = NVTX_MESSAGE_TYPE_UNICODE;
    a.message.unicode = L"gr\u00fc\u00dfe";
    CORE2(DomainMarkEx, nvtxDomainMarkEx_impl_fntype)(wd, &a);
    r = take_one();
    CHECK_EQ(r.ev.nvtx.kind, MRD_NVTX_MARK);
    CHECK_EQ(r.ev.nvtx.start, r.ev.nvtx.end);
    CHECK_STREQ(r.str[0], "daten\xc3\xbc");
    CHECK_STREQ(name_of(&r), "gr\xc3\xbc\xc3\x9f"
                             "e");

    /* An attribute structure too short to hold a message: a nameless mark, no crash. */
    a.size = 8;
    CORE(MarkEx, nvtxMarkEx_impl_fntype)(&a);
    r = take_one();
    CHECK(name_of(&r) == NULL || name_of(&r)[0] == '\0');
}

static void test_marks_names(void)
{
    CORE(MarkA, nvtxMarkA_impl_fntype)("checkpoint");
    struct mrd_record r = take_one();
    CHECK_EQ(r.ev.nvtx.kind, MRD_NVTX_MARK);
    CHECK_STREQ(name_of(&r), "checkpoint");
    CHECK_EQ(r.ev.nvtx.thread, tid());

    CORE(MarkW, nvtxMarkW_impl_fntype)(L"\u03bb");
    r = take_one();
    CHECK_STREQ(name_of(&r), "\xce\xbb");

    /* 70 bytes: 60 ASCII then five 2-byte characters; the copy keeps 63 bytes at most and
     * does not split a character. */
    char longmsg[80];
    memset(longmsg, 'a', 60);
    strcpy(longmsg + 60, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    CORE(MarkA, nvtxMarkA_impl_fntype)(longmsg);
    r = take_one();
    CHECK_EQ(strlen(r.inline_str), 62);
    CHECK_EQ((unsigned char)r.inline_str[60], 0xc3);
    CHECK_EQ((unsigned char)r.inline_str[61], 0xa9);

    CORE(NameOsThreadA, nvtxNameOsThreadA_impl_fntype)(4321, "data-loader");
    r = take_one();
    CHECK_EQ(r.ev.nvtx.kind, MRD_NVTX_MARK);
    CHECK_STREQ(r.str[0], "meridian.thread_name");
    CHECK_STREQ(name_of(&r), "data-loader");
    CHECK_EQ(r.ev.nvtx.thread, 4321);
}

static nvtxRangeId_t started;
static uint32_t starter;

static void *ender(void *arg)
{
    (void)arg;
    CORE(RangeEnd, nvtxRangeEnd_impl_fntype)(started);
    return NULL;
}

static void test_start_end(void)
{
    starter = tid();
    started = CORE(RangeStartA, nvtxRangeStartA_impl_fntype)("load batch");
    CHECK(started != 0);
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, ender, NULL));
    CHECK_OK(pthread_join(t, NULL));
    struct mrd_record r = take_one();
    CHECK_EQ(r.ev.nvtx.kind, MRD_NVTX_STARTEND);
    CHECK_STREQ(name_of(&r), "load batch");
    CHECK_EQ(r.ev.nvtx.thread, starter);
    CHECK(r.ev.nvtx.end >= r.ev.nvtx.start);
    /* Ending the same id again, or an id never handed out, writes nothing. */
    CORE(RangeEnd, nvtxRangeEnd_impl_fntype)(started);
    CORE(RangeEnd, nvtxRangeEnd_impl_fntype)(started + (1u << 10));
    CORE(RangeEnd, nvtxRangeEnd_impl_fntype)(0);
    CHECK_EQ(fake_ring_count(), 0);

    /* Domain start/end with a color. */
    nvtxDomainHandle_t d = CORE2(DomainCreateA, nvtxDomainCreateA_impl_fntype)("io");
    nvtxEventAttributes_t a;
    memset(&a, 0, sizeof(a));
    a.version = NVTX_VERSION;
    a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
    a.colorType = NVTX_COLOR_ARGB;
    a.color = 0x11223344;
    a.messageType = NVTX_MESSAGE_TYPE_ASCII;
    a.message.ascii = "read";
    nvtxRangeId_t id = CORE2(DomainRangeStartEx, nvtxDomainRangeStartEx_impl_fntype)(d, &a);
    CORE2(DomainRangeEnd, nvtxDomainRangeEnd_impl_fntype)(d, id);
    r = take_one();
    CHECK_STREQ(r.str[0], "io");
    CHECK_STREQ(name_of(&r), "read");
    CHECK_UEQ(r.ev.nvtx.color, 0x11223344u);
}

/* Caps: 32 open push/pop ranges per thread, 1024 open start/end ranges per process; what
 * does not fit is counted as nvtx_cap (the ring had room: not ring_full). */
static void test_caps(void)
{
    uint64_t drops = fake_dropped(MRD_DROP_NVTX_CAP), ring = fake_dropped(MRD_DROP_RING_FULL);
    for (int i = 0; i < 40; i++)
        CHECK_EQ(CORE(RangePushA, nvtxRangePushA_impl_fntype)("deep"), i);
    CHECK_UEQ(fake_dropped(MRD_DROP_NVTX_CAP), drops + 8);
    for (int i = 39; i >= 0; i--)
        CHECK_EQ(CORE(RangePop, nvtxRangePop_impl_fntype)(), i);
    CHECK_EQ(fake_ring_count(), 32);
    static struct mrd_record rs[2048];
    CHECK_EQ(fake_ring_take(rs, 32), 32);
    for (int i = 0; i < 32; i++)
        CHECK_EQ(rs[i].ev.nvtx.depth, 31 - i);
    CHECK(CORE(RangePop, nvtxRangePop_impl_fntype)() < 0);

    static nvtxRangeId_t ids[1100];
    size_t ok = 0;
    for (size_t i = 0; i < 1100; i++) {
        ids[i] = CORE(RangeStartA, nvtxRangeStartA_impl_fntype)("r");
        ok += ids[i] != 0;
    }
    CHECK_EQ(ok, 1024);
    CHECK_UEQ(fake_dropped(MRD_DROP_NVTX_CAP), drops + 8 + 76);
    CHECK_UEQ(fake_dropped(MRD_DROP_RING_FULL), ring);
    for (size_t i = 0; i < 1100; i++)
        CORE(RangeEnd, nvtxRangeEnd_impl_fntype)(ids[i]);
    CHECK_EQ(fake_ring_count(), 1024);
    CHECK_EQ(fake_ring_take(rs, 2048), 1024);
    /* Every slot is free again. */
    nvtxRangeId_t again = CORE(RangeStartA, nvtxRangeStartA_impl_fntype)("again");
    CHECK(again != 0);
    CORE(RangeEnd, nvtxRangeEnd_impl_fntype)(again);
    CHECK_STREQ(name_of(&rs[0]), "r");
    (void)take_one();
}

/* An inert agent (after fork, or after shutdown): calls still balance, nothing written. */
static void test_inactive_calls(void)
{
    CHECK_EQ(CORE(RangePushA, nvtxRangePushA_impl_fntype)("before"), 0);
    fake_set_active(0);
    CORE(MarkA, nvtxMarkA_impl_fntype)("m");
    CHECK_EQ(CORE(RangeStartA, nvtxRangeStartA_impl_fntype)("s"), 0);
    CHECK_EQ(CORE(RangePop, nvtxRangePop_impl_fntype)(), 0);
    CHECK_EQ(fake_ring_count(), 0);
    fake_set_active(1);
}

int main(void)
{
    fake_reset();
    test_handshake();
    test_push_pop();
    test_attributes_domains();
    test_marks_names();
    test_start_end();
    test_caps();
    test_inactive_calls();
    printf("capture_nvtx: ok\n");
    return 0;
}
