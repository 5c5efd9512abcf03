/* The API callbacks a window's close turns on, chosen by name (close_cbids.h has the
 * contract). */
#include "close_cbids.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The ids scanned in each domain: those of the CUPTI compiled against (13.0: 523 runtime,
 * 807 driver) and this many more, for a newer libcupti's additions. An id CUPTI does not
 * know (a hole, or past the end) answers an error and is skipped. */
#define SCAN_SLACK 1024
#define KEEP_MAX 1024 /* CUPTI 13.0 names 29 launch, 159 copy and 62 set callbacks */

static struct {
    int scanned;  /* 0 not yet, 1 done (the first attach) */
    int overflow; /* more callbacks matched than KEEP_MAX: the close takes the domains */
    unsigned n;
    struct {
        CUpti_CallbackDomain domain;
        CUpti_CallbackId cbid;
        unsigned classes;
        const char *name; /* CUPTI's own string */
    } keep[KEEP_MAX];
} names;

static unsigned name_classes(const char *name)
{
    unsigned c = 0;
    if (strstr(name, "Launch"))
        c |= MRD_CLOSE_LAUNCH;
    if (strstr(name, "Memcpy"))
        c |= MRD_CLOSE_MEMCPY;
    if (strstr(name, "Memset"))
        c |= MRD_CLOSE_MEMSET;
    return c;
}

static void scan_domain(CUpti_CallbackDomain domain, uint32_t size)
{
    for (uint32_t id = 1; id < size + SCAN_SLACK; id++) {
        const char *name = NULL;
        CUptiResult r = cuptiGetCallbackName(domain, id, &name);
        unsigned c = (r == CUPTI_SUCCESS && name) ? name_classes(name) : 0;
        if (c && names.n == KEEP_MAX)
            names.overflow = 1;
        if (c && names.n < KEEP_MAX) {
            names.keep[names.n].domain = domain;
            names.keep[names.n].cbid = id;
            names.keep[names.n].classes = c;
            names.keep[names.n].name = name;
            names.n++;
        }
    }
}

void mrd__close_cbids_prepare(int print)
{
    if (names.scanned)
        return;
    scan_domain(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE);
    scan_domain(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE);
    names.scanned = 1;
    if (!print)
        return;
    unsigned n_launch = 0, n_memcpy = 0, n_memset = 0;
    fprintf(stderr, "meridian: a window's close enables, of the launches:");
    for (unsigned i = 0; i < names.n; i++) {
        unsigned c = names.keep[i].classes;
        n_launch += (c & MRD_CLOSE_LAUNCH) != 0;
        n_memcpy += (c & MRD_CLOSE_MEMCPY) != 0;
        n_memset += (c & MRD_CLOSE_MEMSET) != 0;
        if (c & MRD_CLOSE_LAUNCH)
            fprintf(stderr, " %s", names.keep[i].name);
    }
    fprintf(stderr, " (%u launch, %u memcpy, %u memset callbacks found by name)\n",
            n_launch, n_memcpy, n_memset);
}

int mrd__close_enable_cbids(CUpti_SubscriberHandle sub, unsigned classes)
{
    mrd__close_cbids_prepare(0);
    if (names.overflow)
        return -1; /* some callbacks of the classes asked for were not kept */
    int on = 0, launches = 0;
    for (unsigned i = 0; i < names.n; i++) {
        if (!(names.keep[i].classes & classes))
            continue;
        if (cuptiEnableCallback(1, sub, names.keep[i].domain, names.keep[i].cbid) !=
            CUPTI_SUCCESS)
            return -1;
        on++;
        launches += (names.keep[i].classes & MRD_CLOSE_LAUNCH) != 0;
    }
    /* without a launch callback no kernel could set the boundary */
    return launches > 0 ? on : -1;
}
