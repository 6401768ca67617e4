/* GGUF model: header, metadata, tensor infos, shapes against the
 * configuration; when the load succeeds, -m inspect's text and JSON (the
 * file's strings escaped), the embedded vocabulary (as run reads it when no
 * -z is given) and a forward pass of one token. */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/fuzz.h"
#include "fuzz/model_run.h"
#include "modes/inspect.h"

/* -m inspect's output, as text (json = 0) or JSON, checked printable. */
static void inspect(const Model *m, int json) {
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    LayerAttention *layers = model_layers_for(m, &m->pe);
    model_inspect(m, &m->pe, layers, out, json, m->config.seq_len, TENSOR_F32);
    free(layers);
    fclose(out);
    fuzz_check_printable(text, n);
    free(text);
}

int fuzz_gguf_model(const uint8_t *data, size_t size) {
    Model m;
    PosencError err = {{0}};
    if (model_load(&m, fuzz_file("model.gguf", data, size), &err)) {
        fuzz_check_error(&err);
        return 0;
    }
    FUZZ_ASSERT(m.gguf != NULL); /* a file starting "GGUF" is never read as llama2.c */
    inspect(&m, 0);
    inspect(&m, 1);
    Tokenizer t;
    if (tokenizer_load_gguf(&t, m.gguf, &err) == 0) {
        fuzz_tokenizer_texts(&t, data, size);
        tokenizer_free(&t);
    } else {
        fuzz_check_error(&err);
    }
    fuzz_forward_one(&m, size);
    model_free(&m);
    return 0;
}

FUZZ_ENTRY_POINT(fuzz_gguf_model)
