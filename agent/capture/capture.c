/* Small helpers every capture source uses on the hot path (see capture.h).
 *
 * The thread id is cached in a thread-local variable: the first call on a thread makes
 * one gettid system call, every later call is a load. Capture runs on threads we do not
 * own, so there is no thread-start hook to fill it earlier.
 */
#include "capture.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread uint32_t cached_tid;
static atomic_int pinned;

void mrd__capture_pin(void)
{
    Dl_info info;
    if (atomic_exchange(&pinned, 1))
        return;
    /* dladdr on one of our own functions names the object we live in; re-opening it with
     * RTLD_NOLOAD | RTLD_NODELETE marks the loaded instance as never unloadable. */
    if (dladdr((void *)mrd__capture_pin, &info) && info.dli_fname)
        dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

uint32_t mrd__capture_tid(void)
{
    if (cached_tid == 0)
        cached_tid = (uint32_t)syscall(SYS_gettid);
    return cached_tid;
}

void mrd__capture_copy_str(char *dst, size_t cap, const char *s)
{
    size_t n = 0;
    if (s) {
        while (n < cap - 1 && s[n])
            n++;
        /* Cut before an incomplete UTF-8 sequence: back up over continuation bytes when
         * the string went on past the cut. */
        if (s[n] && n > 0) {
            size_t k = n;
            while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
                k--;
            n = k;
        }
        memcpy(dst, s, n);
    }
    dst[n] = '\0';
}
