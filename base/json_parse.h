/* Reading JSON (RFC 8259) into a tree: tokenizer.json, tokenizer_config.json
 * and GPT-2's vocab.json.  The text is untrusted: every malformed input is
 * one error "invalid JSON at byte N: WHAT", nesting is bounded (no deep
 * recursion), and sizes are checked.  Strings are decoded (\u escapes and
 * surrogate pairs) into UTF-8; a lone surrogate is an error, since it has
 * no UTF-8 form. */
#ifndef POSENC_JSON_PARSE_H
#define POSENC_JSON_PARSE_H
#include <stddef.h>
#include <stdint.h>

#include "base/util.h"

#define JSON_MAX_DEPTH 128

typedef enum { JSON_NULL, JSON_FALSE, JSON_TRUE, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct JsonValue {
    JsonType type;
    uint32_t len;                /* string: bytes; array, object: members */
    const char *key;             /* this value's key inside an object, else NULL */
    uint32_t key_len;
    double number;               /* JSON_NUMBER */
    const char *string;          /* JSON_STRING: len bytes, NUL-terminated (may hold NULs) */
    struct JsonValue *items;     /* JSON_ARRAY, JSON_OBJECT: (len) members in file order */
} JsonValue;

/* A parsed document; the values live in its arenas until json_free. */
typedef struct JsonChunk JsonChunk;
typedef struct {
    JsonValue root;
    JsonChunk *chunks;  /* every allocation, freed together */
} JsonDoc;

/* Parses len bytes of text (one value, whitespace around it).  Returns 0, or
 * -1 with "invalid JSON at byte N: ..." in err. */
int json_parse(JsonDoc *doc, const char *text, size_t len, PosencError *err);
void json_free(JsonDoc *doc);

/* The member `key` of an object (the last one when a key repeats, as
 * JavaScript and Python read it), or NULL when v is not an object or has
 * no such member.  Linear in the members. */
const JsonValue *json_get(const JsonValue *v, const char *key);
/* The member's string when it is a string, else NULL. */
const char *json_get_string(const JsonValue *v, const char *key);
/* The member as a boolean: 1, 0, or `absent` when missing or null; -1 when
 * it is there with another type. */
int json_get_bool(const JsonValue *v, const char *key, int absent);
/* Whether v is a string equal to s. */
int json_is_string(const JsonValue *v, const char *s);
#endif
