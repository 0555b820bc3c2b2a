/* Unit tests for pool/slot.c: CRC16 against the cluster specification's
 * test vector, slots of known keys (as CLUSTER KEYSLOT answers them), the
 * hash-tag rule of Redis (pool_slot) and Redisson's calcSlot
 * (pool_slot_redisson), including the names where the two differ. The
 * integration tests also compare pool_slot with CLUSTER KEYSLOT of a real
 * server for many keys. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "pool/pool.h"

static uint16_t slot_of(const char *key)
{
    return pool_slot(key, strlen(key));
}

static uint16_t rslot_of(const char *key)
{
    return pool_slot_redisson(key, strlen(key));
}

/* The Redis Cluster specification: "The CRC16 ... output of CRC16 for
 * the string '123456789' is 0x31C3". */
TEST(slot_crc16_spec_vector)
{
    ASSERT_EQ(pool_crc16("123456789", 9), 0x31C3);
    ASSERT_EQ(pool_crc16("", 0), 0);
    ASSERT_EQ(slot_of("123456789"), 0x31C3 & 16383);
}

/* Values CLUSTER KEYSLOT gives on Redis 7. */
TEST(slot_known_keys)
{
    ASSERT_EQ(slot_of("foo"), 12182);
    ASSERT_EQ(slot_of("bar"), 5061);
    ASSERT_EQ(slot_of("ch1"), 9930);
    ASSERT_EQ(slot_of("ch2"), 5801);
    ASSERT_EQ(slot_of("c"), 7365);
    ASSERT_EQ(slot_of(""), 0);
    ASSERT_TRUE(slot_of("somekey") < POOL_SLOTS);
}

/* The specification's own examples of the hash-tag rule. */
TEST(slot_hash_tags_redis)
{
    uint16_t u = slot_of("user1000");

    ASSERT_EQ(slot_of("{user1000}.following"), u);
    ASSERT_EQ(slot_of("{user1000}.followers"), u);
    ASSERT_EQ(slot_of("foo{}{bar}"), pool_crc16("foo{}{bar}", 10) & 16383); /* empty tag */
    ASSERT_EQ(slot_of("foo{{bar}}zap"), slot_of("{bar"));
    ASSERT_EQ(slot_of("foo{bar}{zap}"), slot_of("bar"));
    ASSERT_EQ(slot_of("{"), pool_crc16("{", 1) & 16383);
    ASSERT_EQ(slot_of("a{b"), pool_crc16("a{b", 3) & 16383);
    ASSERT_EQ(slot_of("}{x}"), slot_of("x"));
    ASSERT_EQ(slot_of("a}b{c}"), slot_of("c"));
    /* Redisson's lock layout: the key, its channel and side keys share a slot */
    ASSERT_EQ(slot_of("redisson_lock__channel:{orders}"), slot_of("orders"));
    ASSERT_EQ(slot_of("redisson_lock_timeout:{orders}"), slot_of("orders"));
}

/* Binary keys: the length counts, not a NUL. */
TEST(slot_binary_key)
{
    ASSERT_EQ(pool_slot("a\0b", 3), pool_crc16("a\0b", 3) & 16383);
    ASSERT_NE(pool_slot("a\0b", 3), pool_slot("a", 1));
    ASSERT_EQ(pool_slot("x{a\0b}y", 7), pool_slot("a\0b", 3));
}

/* Redisson's calcSlot: the first '{' and the first '}' anywhere; a tag
 * only when '}' comes after '{' with something between. */
TEST(slot_hash_tags_redisson)
{
    ASSERT_EQ(rslot_of("{user1000}.following"), slot_of("user1000"));
    ASSERT_EQ(rslot_of("orders"), slot_of("orders"));
    ASSERT_EQ(rslot_of("foo{}{bar}"), slot_of("foo{}{bar}"));
    ASSERT_EQ(rslot_of("foo{{bar}}zap"), slot_of("{bar"));
    ASSERT_EQ(rslot_of("foo{bar}{zap}"), slot_of("bar"));
    ASSERT_EQ(rslot_of("a{b"), slot_of("a{b"));
    /* where the rules differ: a '}' before the first '{' */
    ASSERT_EQ(rslot_of("a}b{c}"), pool_crc16("a}b{c}", 6) & 16383);
    ASSERT_NE(rslot_of("a}b{c}"), slot_of("a}b{c}"));
    ASSERT_EQ(rslot_of("}{x}"), pool_crc16("}{x}", 4) & 16383);
    ASSERT_NE(rslot_of("}{x}"), slot_of("}{x}"));
}

/* Every slot is reachable: keys "k0".."k999999" cover all 16384. */
TEST(slot_covers_all)
{
    static uint8_t seen[POOL_SLOTS];
    char key[16];
    unsigned i, n = 0;

    memset(seen, 0, sizeof(seen));
    for (i = 0; i < 1000000; i++) {
        size_t len = (size_t)snprintf(key, sizeof(key), "k%u", i);
        uint16_t s = pool_slot(key, len);

        ASSERT_TRUE(s < POOL_SLOTS);
        n += !seen[s];
        seen[s] = 1;
    }
    ASSERT_EQ(n, POOL_SLOTS);
}

TEST_MAIN(TEST_CASE(slot_crc16_spec_vector), TEST_CASE(slot_known_keys),
          TEST_CASE(slot_hash_tags_redis), TEST_CASE(slot_binary_key),
          TEST_CASE(slot_hash_tags_redisson), TEST_CASE(slot_covers_all))
