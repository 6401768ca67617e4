/* What -m ppl's single run (cli/mode_ppl.c) and the study
 * (cli/mode_ppl_study.c) share. */
#ifndef POSENC_CLI_PPL_H
#define POSENC_CLI_PPL_H

#include "cli/common.h"
#include "modes/perplexity.h"

/* The variants -m ppl runs on one model and the baseline among them. */
typedef struct {
    Variants listed;
    /* Slot 0 is the checkpoint's own scheme, used only when it is the
     * default baseline and --pe does not list it; the listed variants follow. */
    const char *all_labels[MAX_VARIANTS + 1];
    PeParams all_params[MAX_VARIANTS + 1];
    const char **labels;  /* (n) into all_labels */
    PeParams *params;     /* (n) into all_params */
    int n, baseline, added;
    /* A --sinks list: the variants are its settings (labels), all on the one
     * --pe variant sinks_pe_label; NULL: --sinks and --keep hold for every variant. */
    SinkSetting sink_settings[MAX_VARIANTS];
    const SinkSetting *sinks;
    const char *sinks_pe_label;
} PplVariants;

/* The listed variants (Setup's) with the baseline among them, the
 * checkpoint's scheme added when it is the baseline and not listed. */
void resolve_ppl_variants(const Options *o, const Model *model, const Variants *listed,
                          PplVariants *pv);
int *encode_ppl_text(const Options *o, const Tokenizer *tok, int *n_ids);
void check_text_length(const Options *o, int n_ids, int window);
/* The scored text: "-f FILE" or "-i" for messages, the file or "the -i
 * text" for titles. */
const char *ppl_text_name(const Options *o);
const char *ppl_text_title(const Options *o);
/* Scores ids under n variants in windows (or a stream) of `window` tokens: one context
 * per variant, built, run in lockstep and freed here; progress on stderr.
 * 1 when *interrupted (if not NULL) stopped it: res holds what was scored. */
int score_variants(const Options *o, const Model *model, const char *const *labels,
                   const PeParams *params, int n, int baseline, const int *ids, int n_ids, int window,
                   const char *progress_label, LogprobWriter *logprobs,
                   volatile sig_atomic_t *interrupted, PplResult *res);
/* The same for the settings of a --sinks list (pv->sinks). */
int score_sink_settings(const Options *o, const Model *model, const PplVariants *pv,
                        const int *ids, int n_ids, int window, const char *progress_label,
                        LogprobWriter *logprobs, volatile sig_atomic_t *interrupted, PplResult *res);

#endif
