/* analysis_overlap: communication / compute overlap from the sweep, against values
 * computed by hand (interval unions written out in the comments), on three ranks that
 * exercise the three ways of recognising communication kernels, two GPUs on one rank
 * (overlap only counts on the same GPU), and a record lost by CUPTI (start = end = 0).
 */
#include <string.h>

#include "analyze.h"
#include "check.h"
#include "fixture.h"

static void build(sqlite3 *db)
{
    fx_exec(db, "BEGIN");
    fx_run(db, "overlap-run", 3, 0);
    /* rank 0, device 0: compute [0,100) [50,150) [300,400); comm (linked) [80,200)
     * [350,500) [600,700); device 1: compute [600,700) (overlaps device 0's comm in time
     * but not on the same GPU), comm [1000,1100), compute [1050,1060). */
    fx_kernel(db, 0, 0, 1, 0, 100, 1, "sgemm");
    fx_kernel(db, 0, 0, 2, 50, 150, 2, "_Z5sgemmv");
    fx_kernel(db, 0, 0, 1, 300, 400, 3, "relu");
    fx_op(db, 0, 10, 0x77, 0, "AllReduce", 3, 80, 200, 0);
    fx_op(db, 0, 11, 0x77, 1, "AllReduce", 3, 350, 500, 0);
    fx_op(db, 0, 12, 0x77, 2, "AllReduce", 3, 600, 700, 0);
    fx_kernel(db, 0, 1, 1, 600, 700, 4, "conv");
    fx_kernel(db, 0, 1, 2, 1050, 1060, 5, "tiny");
    fx_kernel(db, 0, 0, 1, 0, 0, 6, "lost_by_cupti"); /* start == end == 0: ignored */
    /* device 1's comm kernel, linked to an op of its own */
    fx_exec(db, "INSERT INTO nccl_ops (rank, op_id, start_ns, end_ns, comm_hash, seq, "
                "func_id, launch_id, is_p2p, device) VALUES (0, 13, 990, 995, 136, 0, 1, "
                "777, 0, 1)");
    fx_kernel(db, 0, 1, 9, 1000, 1100, 8800, "ncclDevKernel_AllGather_RING_LL");
    fx_exec(db, "INSERT INTO external_correlations VALUES (0, 8800, 777, 6)");
    /* rank 1, no correlation at all: by name. comm [0,100) [200,300); compute [20,40)
     * [90,150) [250,260) ("my_ncclish" does not start with nccl) */
    fx_kernel(db, 1, 0, 1, 0, 100, 1, "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
    fx_kernel(db, 1, 0, 2, 20, 40, 2, "gemm");
    fx_kernel(db, 1, 0, 2, 90, 150, 3, "_Z5sgemmv");
    fx_kernel(db, 1, 0, 1, 200, 300, 4, "_ZN4nccl6kernelEv");
    fx_kernel(db, 1, 0, 2, 250, 260, 5, "my_ncclish");
    /* rank 2, mixed: linked comm [0,100), an unlinked "nccl" kernel [200,300), compute
     * [50,250) */
    fx_op(db, 2, 20, 0x77, 0, "AllReduce", 3, 0, 100, 0);
    fx_kernel(db, 2, 0, 1, 200, 300, 9, "ncclDevKernel_Broadcast_RING_LL");
    fx_kernel(db, 2, 0, 2, 50, 250, 10, "attention");
    fx_exec(db, "COMMIT");
}

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "analysis_overlap.db";
    sqlite3 *db = fx_create(path);
    struct mrd_analysis *a = NULL;
    const char *msg = NULL;
    build(db);
    CHECK_OK(mrd_analyze(db, NULL, &a, &msg));
    CHECK_EQ(a->nranks, 3);

    /* rank 0: device 0 comm = 120 + 150 + 100 = 370, compute = [0,150) + [300,400) = 250,
     * hidden = [80,150) + [350,400) = 120, busy = [0,200) + [300,500) + [600,700) = 500,
     * span 700. Device 1: comm 100, compute 100 + 10, hidden [1050,1060) = 10, busy 200,
     * span [600,1100) = 500. */
    const struct mrd_an_overlap *o = &a->ranks[0].ov;
    CHECK_EQ(o->comm_ns, 370 + 100);
    CHECK_EQ(o->compute_ns, 250 + 110);
    CHECK_EQ(o->hidden_ns, 120 + 10);
    CHECK_EQ(o->exposed_ns, 470 - 130);
    CHECK_EQ(o->busy_ns, 500 + 200);
    CHECK_EQ(o->span_ns, 700 + 500);
    CHECK_EQ(o->comm_kernels, 4);
    CHECK_EQ(o->compute_kernels, 5); /* the lost record is not counted */
    CHECK_EQ(o->method, MRD_AN_METHOD_CORRELATION);
    CHECK(o->ratio > 130.0 / 470 - 1e-12 && o->ratio < 130.0 / 470 + 1e-12);

    /* rank 1: comm 200, compute 20 + 60 + 10 = 90, hidden [20,40) + [90,100) + [250,260)
     * = 40, exposed 160, ratio 0.2, by name */
    o = &a->ranks[1].ov;
    CHECK_EQ(o->comm_ns, 200);
    CHECK_EQ(o->compute_ns, 90);
    CHECK_EQ(o->hidden_ns, 40);
    CHECK_EQ(o->exposed_ns, 160);
    CHECK_EQ(o->method, MRD_AN_METHOD_NAME);
    CHECK_EQ(o->name_only_kernels, 2);
    CHECK(o->ratio > 0.2 - 1e-12 && o->ratio < 0.2 + 1e-12);

    /* rank 2: comm [0,100) + [200,300) = 200, compute [50,250) = 200, hidden [50,100) +
     * [200,250) = 100; one comm kernel found by name only */
    o = &a->ranks[2].ov;
    CHECK_EQ(o->comm_ns, 200);
    CHECK_EQ(o->compute_ns, 200);
    CHECK_EQ(o->hidden_ns, 100);
    CHECK_EQ(o->method, MRD_AN_METHOD_MIXED);
    CHECK_EQ(o->name_only_kernels, 1);
    CHECK_STREQ(mrd_analyze_method_name(o->method), "correlation+name");

    /* the name rule itself */
    CHECK_EQ(mrd_analyze_is_nccl_name("ncclDevKernel_AllReduce"), 1);
    CHECK_EQ(mrd_analyze_is_nccl_name("_Z28ncclDevKernel_AllGather_RINGv"), 1);
    CHECK_EQ(mrd_analyze_is_nccl_name("_ZN4nccl6kernelEv"), 1);
    CHECK_EQ(mrd_analyze_is_nccl_name("my_ncclish"), 0);
    CHECK_EQ(mrd_analyze_is_nccl_name("_Z5sgemmv"), 0);
    CHECK_EQ(mrd_analyze_is_nccl_name(NULL), 0);
    /* warnings name the ranks that fell back to names */
    int found = 0;
    for (int i = 0; i < a->nwarnings; i++)
        found += strstr(a->warnings[i], "rank 1:") != NULL || strstr(a->warnings[i], "rank 2:");
    CHECK_EQ(found, 2);
    mrd_analysis_free(a);
    sqlite3_close(db);
    printf("analysis_overlap: ok\n");
    return 0;
}
