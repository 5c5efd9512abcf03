/* Small helpers every capture source uses on the hot path (see capture.h).
 *
 * The thread id is cached in the thread's capture state (struct mrd__capture_thread, in
 * its ring's state area; not a __thread variable, see capture.h): the first call on a
 * thread makes one gettid system call, every later call is a load. Capture runs on threads
 * we do not own, so there is no thread-start hook to fill it earlier.
 */
#include "capture.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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

struct mrd__capture_thread *mrd__capture_thread(void)
{
    return mrd_ring_thread_state();
}

uint32_t mrd__capture_tid_in(struct mrd__capture_thread *t)
{
    if (t->tid == 0)
        t->tid = (uint32_t)syscall(SYS_gettid);
    return t->tid;
}

uint32_t mrd__capture_tid(void)
{
    struct mrd__capture_thread *t = mrd__capture_thread();
    return t ? mrd__capture_tid_in(t) : (uint32_t)syscall(SYS_gettid);
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
