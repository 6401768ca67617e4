/* -m inspect. */
#include <stdlib.h>

#include "base/gguf.h"
#include "cli/common.h"
#include "cli/modes.h"
#include "modes/inspect.h"

/* What would run: the checkpoint after --pe and the positional flags; a
 * GGUF without tensors is shown as the vocabulary it is. */
int run_inspect(const Options *o) {
    if (!o->model_path) cli_die("no model given (usage: run MODEL -m inspect)");
    PosencError err;
    int is_gguf = gguf_file_has_magic(o->model_path, &err);
    if (is_gguf < 0) cli_die("%s", err.msg);
    if (is_gguf) {
        GgufFile g;
        if (gguf_open(&g, o->model_path, &err)) cli_die("%s", err.msg);
        int vocab_only = g.n_tensors == 0;
        if (vocab_only) {
            if (o->pe_list || o->n_given > 1 + o->json)
                cli_die("%s holds no tensors (a vocabulary): only --json applies", o->model_path);
            gguf_inspect_vocab(&g, stdout, o->json);
        }
        gguf_close(&g);
        if (vocab_only) return EXIT_SUCCESS;
    }
    Setup s;
    setup_open(&s, o, SETUP_VARIANTS);
    LayerAttention *layers = variant_layers(o, &s.model, &s.v.params[0], s.v.labels[0], s.n_ctx);
    model_inspect(&s.model, &s.v.params[0], layers, stdout, o->json, s.n_ctx, kv_type(o));
    free(layers);
    setup_close(&s);
    return EXIT_SUCCESS;
}
