/* What a file is, from its first bytes: so a file passed where another
 * kind belongs (an image or a safetensors file as the model, merges.txt as
 * the tokenizer) is named for what it is, not reported as a broken header
 * of the kind expected. */
#ifndef POSENC_BASE_FILE_KIND_H
#define POSENC_BASE_FILE_KIND_H

typedef enum {
    FILE_KIND_UNREADABLE,    /* missing or unreadable: the loader says why */
    FILE_KIND_DIRECTORY,
    FILE_KIND_EMPTY,
    FILE_KIND_GGUF,
    FILE_KIND_SAFETENSORS,
    FILE_KIND_JSON,
    FILE_KIND_SENTENCEPIECE, /* a SentencePiece .model (protobuf) */
    FILE_KIND_IMAGE,         /* PNG, JPEG, GIF, or a PDF document */
    FILE_KIND_TEXT,          /* UTF-8 text */
    FILE_KIND_OTHER,         /* binary of no kind above: a llama2.c checkpoint or tokenizer.bin */
} FileKind;

/* The kind of the file at path; *what (when not NULL) names it for a
 * message: "a PNG image", "a safetensors file", ... */
FileKind file_kind(const char *path, const char **what);

#endif
