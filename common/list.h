/* Intrusive circular doubly linked list (libuv/Linux style).
 *
 * A node embedded in an object is named after the list it belongs to
 * (struct list wait_node;  in x.waiters). An empty head and an unlinked node
 * both point to themselves, so list_is_linked() is O(1): every removal goes
 * through list_del_init(). */
#ifndef LP_COMMON_LIST_H
#define LP_COMMON_LIST_H

#include <stdbool.h>

#include "common/compiler.h"

#ifdef __cplusplus
extern "C" {
#endif

struct list {
    struct list *next; /* borrowed: next node, or the head */
    struct list *prev; /* borrowed: previous node, or the head */
};

static inline void list_init(struct list *l)
{
    l->next = l;
    l->prev = l;
}

static inline bool list_empty(const struct list *head)
{
    return head->next == head;
}

/* True when the node is on some list (nodes are re-initialised on removal). */
static inline bool list_is_linked(const struct list *node)
{
    return node->next != node;
}

static inline void list_insert_between(struct list *n, struct list *prev, struct list *next)
{
    n->next = next;
    n->prev = prev;
    prev->next = n;
    next->prev = n;
}

/* Append at the tail (FIFO order with list_first). */
static inline void list_add_tail(struct list *head, struct list *n)
{
    list_insert_between(n, head->prev, head);
}

static inline void list_add_head(struct list *head, struct list *n)
{
    list_insert_between(n, head, head->next);
}

static inline void list_del_init(struct list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    list_init(n);
}

/* First node, or NULL when the list is empty. */
static inline struct list *list_first(const struct list *head)
{
    return list_empty(head) ? NULL : head->next;
}

/* Move every node of src to the tail of dst; src is left empty. */
static inline void list_splice_tail_init(struct list *dst, struct list *src)
{
    if (list_empty(src))
        return;
    src->next->prev = dst->prev;
    dst->prev->next = src->next;
    src->prev->next = dst;
    dst->prev = src->prev;
    list_init(src);
}

#define list_entry(node, type, member) LP_CONTAINER_OF(node, type, member)

#define list_for_each_safe(pos, tmp, head)                           \
    for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
         (pos) = (tmp), (tmp) = (pos)->next)

#ifdef __cplusplus
}
#endif

#endif
