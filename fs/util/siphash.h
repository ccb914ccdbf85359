/* SPDX-License-Identifier: MIT */
/*
 * siphash.h - SipHash-2-4 (Aumasson and Bernstein, 2012), a keyed pseudorandom function
 * of short inputs: the MAC of the placement channel's file handles (place/batch.c). A
 * 64-bit tag a client cannot compute without the 128-bit key, which never leaves the
 * daemon.
 */
#ifndef DMAFS_SIPHASH_H
#define DMAFS_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of @len bytes at @in under key @k (k[0]: key bytes 0-7, little endian). */
uint64_t siphash24(const uint64_t k[2], const void *in, size_t len);

#endif
