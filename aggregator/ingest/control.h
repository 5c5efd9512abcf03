/* meridian control socket: how `meridian window` asks a running meridiand for a window.
 *
 * Where it sits: meridiand --control PATH listens on a Unix stream socket at PATH (mode
 * 0600; a peer of another user id is refused), served by the ingest loop (control.c) next
 * to the agents' TCP connections; `meridian profile` passes DB + MRD_CONTROL_SUFFIX and
 * removes it at the end, meridiand removes it on exit. The client is
 * launcher/window_cmd.c.
 *
 * The line protocol, one request per connection (the daemon answers one line and closes):
 *   "window [LENGTH]\n"  -> "ok id=N steps=A-B margin=M ranks=R\n" or "error <reason>\n"
 * LENGTH is decimal, 1 to MRD_WINCTL_LENGTH_MAX steps (default MRD_CONTROL_DEFAULT_LENGTH);
 * a trailing "\r" and blanks between words are accepted. The window's steps are chosen by
 * winctl.h's rule and reach every rank in its next ClockReplies.
 *
 * Limits (daemon side): a request line is at most MRD_CONTROL_LINE_MAX bytes including
 * its newline (longer: "error ..." and closed); a client that completes no line within
 * MRD_CONTROL_IDLE_MS is answered "error ..." and closed; at most MRD_CONTROL_CLIENTS
 * clients at once (one more is answered "error busy ..." and closed). Nothing blocks the
 * loop: every socket is non-blocking and the reply (< 256 bytes) goes out in one send.
 */
#ifndef MRD_CONTROL_H
#define MRD_CONTROL_H

#include <sys/socket.h>
#include <sys/un.h>

#define MRD_CONTROL_SUFFIX         ".ctl"
#define MRD_CONTROL_LINE_MAX       256
#define MRD_CONTROL_IDLE_MS        2000
#define MRD_CONTROL_CLIENTS        4
#define MRD_CONTROL_DEFAULT_LENGTH 10

/* Fills *sa and *len with the address of the socket at `path`. A path longer than
 * sun_path holds is reached through its directory: *dirfd is then an O_PATH descriptor
 * of that directory, the address "/proc/self/fd/N/NAME", and the caller closes *dirfd
 * after bind or connect; otherwise *dirfd is -1. Returns 0, -ENAMETOOLONG (the file name
 * alone does not fit) or the negative errno of opening the directory. Any thread. */
int mrd_control_sockaddr(const char *path, struct sockaddr_un *sa, socklen_t *len, int *dirfd);

#endif
