/* meridian authentication: a peer proves it holds the run secret without sending it.
 *
 * The handshake (protocol version 2, proto/COMPATIBILITY.md section 10):
 *   agent -> Hello      who it claims to be (run id, rank, agent_instance, role); no secret
 *   meridiand -> Challenge  MRD_AUTH_NONCE_BYTES fresh random bytes (mrd_auth_nonce), new
 *                        for every connection and never reused
 *   agent -> Proof      mrd_auth_proof(secret, nonce, claim): HMAC-SHA256
 *   meridiand           mrd_auth_check: the same MAC, compared in constant time; then the
 *                        run id, role and rank checks, and the HelloReply
 * A recorded Hello and Proof replayed on a new connection meet a new nonce, and the old
 * Proof does not match it: joining needs the secret, not a copy of the traffic.
 *
 * MAC = HMAC-SHA256(key = the run secret (1..MRD_SECRET_MAX bytes, proto/runcfg.h),
 *                   message = "meridian-proof-v2"   17 bytes, no NUL (domain separation)
 *                             || nonce              32 bytes
 *                             || role               u32, little-endian (ConnectionRole)
 *                             || rank               u32, little-endian
 *                             || agent_instance     u64, little-endian
 *                             || run id length      u32, little-endian
 *                             || run id             that many bytes, no NUL)
 * Binding the claim into the MAC means a proof speaks for that claim only: whatever else
 * the Hello says (host, pid, GPUs) is taken as told, as before.
 *
 * Crypto comes from libsodium (crypto_auth_hmacsha256_*, sodium_memcmp, randombytes via
 * getrandom): pure functions without process-wide teardown. That matters in the agent,
 * a library injected into other people's processes: OpenSSL 3 routes HMAC through a
 * library context that OPENSSL_cleanup (an atexit handler of whoever initialised OpenSSL
 * in the host process) frees, while our flusher may still be reconnecting in the exit
 * flush. Workload: one nonce, one or two MACs per connection (cold path). Thread-safe.
 */
#ifndef MRD_AUTH_H
#define MRD_AUTH_H

#include <stddef.h>
#include <stdint.h>

#define MRD_AUTH_NONCE_BYTES 32u
#define MRD_AUTH_MAC_BYTES   32u
#define MRD_AUTH_RUN_ID_MAX  256u /* a longer run id cannot prove anything (Batch.run_id's cap) */

/* What a Hello claims, and the Proof speaks for. */
struct mrd_auth_claim {
    const char *run_id; /* NULL reads as "" */
    uint32_t role;      /* Meridian__V1__ConnectionRole */
    uint32_t rank;
    uint64_t agent_instance;
};

/* Fills nonce with MRD_AUTH_NONCE_BYTES bytes from the kernel's CSPRNG (getrandom, which
 * waits only until the pool was first seeded at boot). Returns 0, or a negative errno.
 * Any thread. */
int mrd_auth_nonce(uint8_t nonce[MRD_AUTH_NONCE_BYTES]);

/* Computes the Proof's MAC (layout above) into mac. secret: secret_len >= 1 bytes (not
 * NUL-terminated); nonce: nonce_len bytes, which must be MRD_AUTH_NONCE_BYTES. Returns 0,
 * -EINVAL (empty secret, a nonce of another length, a run id over MRD_AUTH_RUN_ID_MAX
 * bytes), or -ENOSYS when libsodium cannot initialise. Nothing is allocated. Any thread. */
int mrd_auth_proof(const uint8_t *secret, size_t secret_len, const uint8_t *nonce, size_t nonce_len,
                   const struct mrd_auth_claim *claim, uint8_t mac[MRD_AUTH_MAC_BYTES]);

/* Checks a Proof: 1 when mac (mac_len bytes from the wire) is the MAC mrd_auth_proof
 * computes for (secret, nonce, claim), 0 when it is not (a wrong length included; the
 * comparison's time does not depend on where the bytes differ), or a negative code of
 * mrd_auth_proof (the claim cannot be proven: treat as not matching). Any thread. */
int mrd_auth_check(const uint8_t *secret, size_t secret_len, const uint8_t *nonce, size_t nonce_len,
                   const struct mrd_auth_claim *claim, const uint8_t *mac, size_t mac_len);

#endif
