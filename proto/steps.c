/* Steps and capture windows: the shared rules (contract in steps.h). */
#include "steps.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

int mrd_step_name_match(const char *name, const char *prefix)
{
    int dflt = prefix == NULL || prefix[0] == '\0';
    const char *p = dflt ? "step" : prefix;
    size_t n = strlen(p);
    if (!name)
        return 0;
    if (dflt && strncmp(name, "ProfilerStep", 12) == 0)
        return 1;
    if (dflt && strncasecmp(name, "train", 5) == 0) {
        name += 5;
        if (strncasecmp(name, "ing", 3) == 0)
            name += 3;
        if (*name == '_' || *name == ' ')
            name++;
    }
    if (strncasecmp(name, p, n) != 0)
        return 0;
    char c = name[n];
    return c == '\0' || c == ' ' || c == '#' || c == ':' || c == '=' || c == '-' || c == '[' ||
           c == '(' || (c >= '0' && c <= '9');
}

/* Reads a decimal number 0..MRD_WINDOW_STEP_MAX at *s, advancing *s. Returns 0 or -1. */
static int number(const char **s, int64_t *out)
{
    const char *p = *s;
    int64_t v = 0;
    if (!isdigit((unsigned char)*p))
        return -1;
    while (isdigit((unsigned char)*p)) {
        v = v * 10 + (*p - '0');
        if (v > MRD_WINDOW_STEP_MAX)
            return -1;
        p++;
    }
    *s = p;
    *out = v;
    return 0;
}

/* One term (its text is s[0..len)); fills *t. Returns 0 or -1 with why[] set. */
static int term(const char *s, size_t len, int index, struct mrd_window_term *t, char *why,
                size_t why_len)
{
    char buf[96];
    if (len == 0 || len >= sizeof(buf)) {
        snprintf(why, why_len, "term %d is %s", index, len ? "too long" : "empty");
        return -1;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    const char *p = buf;
    int64_t a, b;
    memset(t, 0, sizeof(*t));
    if (number(&p, &a)) {
        snprintf(why, why_len,
                 "term %d \"%s\" does not start with a step number (0..%" PRId64 ")", index,
                 buf, (int64_t)MRD_WINDOW_STEP_MAX);
        return -1;
    }
    if (*p == '\0') {
        *t = (struct mrd_window_term){.reason = MRD_WINDOW_RANGE, .first = a, .last = a};
        return 0;
    }
    if (*p == '-') {
        p++;
        if (number(&p, &b) || *p) {
            snprintf(why, why_len, "term %d \"%s\": expected A-B, two step numbers", index, buf);
            return -1;
        }
        if (b < a) {
            snprintf(why, why_len, "term %d \"%s\": the last step is before the first", index,
                     buf);
            return -1;
        }
        *t = (struct mrd_window_term){.reason = MRD_WINDOW_RANGE, .first = a, .last = b};
        return 0;
    }
    if (*p == '/') {
        int64_t start = 0;
        p++;
        if (number(&p, &b) || (*p && *p != '@')) {
            snprintf(why, why_len, "term %d \"%s\": expected L/P or L/P@S (L steps every P)",
                     index, buf);
            return -1;
        }
        if (*p == '@') {
            p++;
            if (number(&p, &start) || *p) {
                snprintf(why, why_len, "term %d \"%s\": expected a first step after '@'", index,
                         buf);
                return -1;
            }
        }
        if (a == 0 || b == 0) {
            snprintf(why, why_len, "term %d \"%s\": the length and the period must be at least 1",
                     index, buf);
            return -1;
        }
        if (a > b) {
            snprintf(why, why_len,
                     "term %d \"%s\": the length %" PRId64 " is longer than the period %" PRId64,
                     index, buf, a, b);
            return -1;
        }
        *t = (struct mrd_window_term){
            .reason = MRD_WINDOW_PERIODIC, .length = a, .period = b, .start = start};
        return 0;
    }
    snprintf(why, why_len, "term %d \"%s\": expected A, A-B, L/P or L/P@S", index, buf);
    return -1;
}

int mrd_windows_parse(const char *spec, struct mrd_windows *w, char *why, size_t why_len)
{
    memset(w, 0, sizeof(*w));
    if (why_len)
        why[0] = '\0';
    if (!spec)
        return 0;
    while (*spec == ' ' || *spec == '\t')
        spec++;
    if (*spec == '\0' || strcmp(spec, "none") == 0)
        return 0;
    const char *p = spec;
    for (int index = 1;; index++) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t'))
            p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (w->n == MRD_WINDOW_TERMS) {
            snprintf(why, why_len, "more than %d terms", MRD_WINDOW_TERMS);
            goto fail;
        }
        if (term(p, len, index, &w->t[w->n], why, why_len))
            goto fail;
        w->n++;
        if (!end)
            return 0;
        p = end + 1;
    }
fail:
    memset(w, 0, sizeof(*w));
    return -EINVAL;
}

int mrd_windows_holds(const struct mrd_windows *w, int64_t step, int *reason)
{
    if (step < 0)
        return 0;
    for (int i = 0; i < w->n; i++) {
        const struct mrd_window_term *t = &w->t[i];
        int in = t->reason == MRD_WINDOW_RANGE
                     ? step >= t->first && step <= t->last
                     : step >= t->start && (step - t->start) % t->period < t->length;
        if (in) {
            if (reason)
                *reason = t->reason;
            return 1;
        }
    }
    return 0;
}

const char *mrd_window_reason_name(int reason)
{
    switch (reason) {
    case MRD_WINDOW_RANGE:
        return "range";
    case MRD_WINDOW_PERIODIC:
        return "periodic";
    case MRD_WINDOW_ON_DEMAND:
        return "on_demand";
    case MRD_WINDOW_TRIGGER:
        return "trigger";
    case MRD_WINDOW_DELAY:
        return "delay";
    case MRD_WINDOW_PROFILER_API:
        return "profiler_api";
    default:
        return "unknown";
    }
}

void mrd_windows_format(const struct mrd_windows *w, char *out, size_t n)
{
    size_t used = 0;
    if (n == 0)
        return;
    out[0] = '\0';
    if (w->n == 0) {
        snprintf(out, n, "none");
        return;
    }
    for (int i = 0; i < w->n && used < n; i++) {
        const struct mrd_window_term *t = &w->t[i];
        const char *sep = i ? "," : "";
        int k;
        if (t->reason == MRD_WINDOW_RANGE && t->first == t->last)
            k = snprintf(out + used, n - used, "%s%" PRId64, sep, t->first);
        else if (t->reason == MRD_WINDOW_RANGE)
            k = snprintf(out + used, n - used, "%s%" PRId64 "-%" PRId64, sep, t->first, t->last);
        else
            k = snprintf(out + used, n - used, "%s%" PRId64 "/%" PRId64 "@%" PRId64, sep,
                         t->length, t->period, t->start);
        if (k < 0)
            break;
        used += (size_t)k;
    }
}
