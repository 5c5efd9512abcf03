/* meridian authentication: nonce, proof, constant-time check (contract and design in
 * auth.h). Sits in mrd_proto, linked by the agent, meridiand and the CLI alike, so both
 * sides compute the MAC with the same bytes.
 */
#include "auth.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <sodium.h>

static const char k_label[] = "meridian-proof-v2"; /* 17 bytes, the NUL not sent */

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int mrd_auth_nonce(uint8_t nonce[MRD_AUTH_NONCE_BYTES])
{
    size_t got = 0;
    while (got < MRD_AUTH_NONCE_BYTES) {
        ssize_t n = getrandom(nonce + got, MRD_AUTH_NONCE_BYTES - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        got += (size_t)n;
    }
    return 0;
}

int mrd_auth_proof(const uint8_t *secret, size_t secret_len, const uint8_t *nonce, size_t nonce_len,
                   const struct mrd_auth_claim *claim, uint8_t mac[MRD_AUTH_MAC_BYTES])
{
    const char *run = claim->run_id ? claim->run_id : "";
    size_t run_len = strlen(run);
    uint8_t fixed[4 + 4 + 8 + 4];
    crypto_auth_hmacsha256_state st;

    if (secret_len == 0 || nonce_len != MRD_AUTH_NONCE_BYTES || run_len > MRD_AUTH_RUN_ID_MAX)
        return -EINVAL;
    /* sodium_init: idempotent and thread-safe; HMAC-SHA256 itself needs no state of it,
     * but the library asks for the call before any other */
    if (sodium_init() < 0)
        return -ENOSYS;
    put_le32(fixed, claim->role);
    put_le32(fixed + 4, claim->rank);
    put_le64(fixed + 8, claim->agent_instance);
    put_le32(fixed + 16, (uint32_t)run_len);
    crypto_auth_hmacsha256_init(&st, secret, secret_len);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)k_label, sizeof(k_label) - 1);
    crypto_auth_hmacsha256_update(&st, nonce, nonce_len);
    crypto_auth_hmacsha256_update(&st, fixed, sizeof(fixed));
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)run, run_len);
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_memzero(&st, sizeof(st)); /* it holds the keyed inner and outer hashes */
    return 0;
}

int mrd_auth_check(const uint8_t *secret, size_t secret_len, const uint8_t *nonce, size_t nonce_len,
                   const struct mrd_auth_claim *claim, const uint8_t *mac, size_t mac_len)
{
    uint8_t want[MRD_AUTH_MAC_BYTES];
    int rc = mrd_auth_proof(secret, secret_len, nonce, nonce_len, claim, want);
    if (rc < 0)
        return rc;
    /* the length is public (always 32 from a correct peer); the bytes compared in
     * constant time */
    rc = mac_len == MRD_AUTH_MAC_BYTES && sodium_memcmp(want, mac, MRD_AUTH_MAC_BYTES) == 0;
    sodium_memzero(want, sizeof(want));
    return rc;
}
