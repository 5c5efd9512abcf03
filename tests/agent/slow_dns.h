/* A slow name server for the agent's transport tests (slow_dns.c). */
#ifndef MRD_TEST_SLOW_DNS_H
#define MRD_TEST_SLOW_DNS_H

/* Lookups of *.meridian-test names answered so far (any thread). */
unsigned long mrd_test_dns_lookups(void);

#endif
