/* -m serve: modes/serve_api.c behind libmicrohttpd (an optional build
 * dependency: without it the mode says how to get it).  The daemon gives
 * each connection a thread, which waits in the API's queue for a slot and
 * runs the request on it (a stream's events are pulled by libmicrohttpd on
 * that thread); the main thread waits for SIGINT or SIGTERM and then stops
 * the daemon. */
#include <omp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "cli/common.h"
#include "cli/modes.h"
#include "modes/serve_api.h"

#ifndef POSENC_HAVE_MHD
int run_serve(const Options *o) {
    cli_die("-m serve: this ./run was built without libmicrohttpd: install the Debian package "
            "libmicrohttpd-dev (apt-get install libmicrohttpd-dev) and run make again");
}
#else
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <time.h>

/* A client that has not sent a whole request within this many seconds is
 * dropped, so a connection that never finishes its headers cannot hold the
 * server (slowloris). */
#define CONNECTION_TIMEOUT_S 10

static volatile sig_atomic_t stop_requested;
static void request_stop(int sig) { stop_requested = sig; }

/* One request as it arrives: its body, kept up to the limit (past it only
 * counted: the API refuses it with 413). */
typedef struct {
    char *body;
    size_t len, cap, received;
    double t_start;
} Upload;

static void append(Upload *u, const char *data, size_t n) {
    u->received += n;
    if (u->received > SERVE_MAX_BODY) return;
    if (u->len + n > u->cap) {
        size_t cap = u->cap ? u->cap : 4096;
        while (cap < u->len + n) cap *= 2;
        char *grown = realloc(u->body, cap);
        if (!grown) posenc_out_of_memory(cap, 1, "a request body");
        u->body = grown;
        u->cap = cap;
    }
    memcpy(u->body + u->len, data, n);
    u->len += n;
}

static void log_request(const char *method, const char *url, const ServeResponse *r, double t_start) {
    fprintf(stderr, "serve: %s %s %d", method, url, r->status);
    if (r->slot >= 0)
        fprintf(stderr, " slot %d prompt %d tokens (%d cached) generated %d", r->slot, r->n_prompt, r->n_reused,
                r->n_generated);
    fprintf(stderr, " %.1f ms\n", 1e3 * (time_now_s() - t_start));
}

/* A streamed response: its request's line for the log, and the stream
 * whose events libmicrohttpd pulls. */
typedef struct {
    ServeStream *stream;
    char method[16], url[64];
    double t_start;
    const char *pending;  /* the part of the last event not yet handed over */
    size_t n_pending;
} Streamed;

/* libmicrohttpd asks for the next bytes of a stream (into buf, at most max)
 * whenever the socket can take them; on this connection's own thread. */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    Streamed *s = cls;
    if (!s->n_pending && !serve_stream_next(s->stream, &s->pending, &s->n_pending))
        return MHD_CONTENT_READER_END_OF_STREAM;
    size_t n = s->n_pending < max ? s->n_pending : max;
    memcpy(buf, s->pending, n);
    s->pending += n;
    s->n_pending -= n;
    return (ssize_t)n;
}

/* The stream is over, whole or not (libmicrohttpd calls this too when the
 * client went away mid-stream): its slot is free again. */
static void stream_done(void *cls) {
    Streamed *s = cls;
    const ServeResponse *counts = serve_stream_counts(s->stream);
    log_request(s->method, s->url, counts, s->t_start);
    serve_stream_free(s->stream);
    free(s);
}

/* libmicrohttpd calls this first with the headers, then once per piece of
 * the body, then with no more data: the request is answered then (on the
 * connection's own thread, which waits here for a slot). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    ServeApi *api = cls;
    Upload *u = *con_cls;
    if (!u) {
        u = calloc_or_exit(1, sizeof *u, "a request");
        u->t_start = time_now_s();
        *con_cls = u;
        return MHD_YES;
    }
    if (*upload_data_size) {
        append(u, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return MHD_YES;
    }
    ServeResponse r;
    ServeStream *stream;
    /* a body past the limit: its length is what the API refuses on */
    serve_begin(api, method, url, u->body, u->received, &r, &stream);
    struct MHD_Response *resp;
    if (stream) {
        Streamed *s = calloc_or_exit(1, sizeof *s, "a stream");
        *s = (Streamed){.stream = stream, .t_start = u->t_start};
        snprintf(s->method, sizeof s->method, "%s", method);
        snprintf(s->url, sizeof s->url, "%s", url);
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, s, stream_done);
        if (!resp) posenc_out_of_memory(1, sizeof *s, "a stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    } else {
        resp = MHD_create_response_from_buffer(r.len, r.body, MHD_RESPMEM_MUST_FREE);
        if (!resp) posenc_out_of_memory(r.len, 1, "a response");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        log_request(method, url, &r, u->t_start);
    }
    enum MHD_Result queued = MHD_queue_response(conn, (unsigned)r.status, resp);
    MHD_destroy_response(resp);
    return queued;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
    Upload *u = *con_cls;
    if (!u) return;
    free(u->body);
    free(u);
    *con_cls = NULL;
}

int run_serve(const Options *o) {
    const char *host = o->host ? o->host : "127.0.0.1";
    struct sockaddr_in v4 = {.sin_family = AF_INET, .sin_port = htons((uint16_t)o->port)};
    struct sockaddr_in6 v6 = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)o->port)};
    int ipv6 = 0;
    if (inet_pton(AF_INET, host, &v4.sin_addr) != 1) {
        if (inet_pton(AF_INET6, host, &v6.sin6_addr) != 1)
            cli_die("--host %s: not an IPv4 or IPv6 address", posenc_escape(host).s);
        ipv6 = 1;
    }
    Setup s;
    setup_open(&s, o, SETUP_TOKENIZER | SETUP_VARIANTS);
    for (int v = 0; v < s.v.n; v++) check_positions(&s.model, &s.v.params[v], s.v.labels[v], s.n_ctx - 1);
    /* the chat template: --chat-template's, else the model's; without one
     * /v1/chat/completions refuses, naming the flag */
    int has_template = o->chat_template || (s.model.gguf && gguf_find_kv(s.model.gguf, "tokenizer.chat_template"));
    JinjaTemplate *template = has_template ? load_chat_template(o, &s.model) : NULL;
    JsonDoc kwargs_doc;
    const JsonValue *kwargs = load_template_kwargs(o, &kwargs_doc);
    ChatFormat chat;
    if (template) chat_format_init(&chat, template, kwargs, &s.tok);
    /* --slots contexts per positional variant, all on the one copy of the weights */
    int n_slots = o->slots * s.v.n;
    /* without --threads the slots share the cores: OpenMP teams of every core
     * in each busy slot would contend for them (their spinning barriers wait
     * far longer on a core another team holds) */
    if (!o->threads && n_slots > 1) {
        int per_slot = omp_get_num_procs() / n_slots;
        omp_set_num_threads(per_slot > 1 ? per_slot : 1);
    }
    Context *ctxs = calloc_or_exit((size_t)n_slots, sizeof *ctxs, "the slots");
    for (int i = 0; i < n_slots; i++)
        build_context(&ctxs[i], o, &s.model, &s.v.params[i / o->slots], s.v.labels[i / o->slots],
                      serve_context_size(s.n_ctx, kv_type(o)));
    /* the model's file name is its id, as llama-server lists it */
    const char *slash = strrchr(o->model_path, '/');
    ServeConfig cfg = {
        .tok = &s.tok, .chat = template ? &chat : NULL, .model_id = slash ? slash + 1 : o->model_path,
        .defaults = {.temperature = o->temperature, .top_p = o->topp, .min_p = o->min_p, .top_k = o->topk,
                     .penalties = o->penalties, .max_tokens = cli_given(o, "-n") ? o->steps : 0},
        /* -s makes the seeds of requests without one reproducible run to run */
        .seed = o->seed ? o->seed : (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32),
        .max_queue = o->queue, .variants = s.v.labels, .n_variants = s.v.n};
    ServeApi api;
    serve_api_init(&api, ctxs, n_slots, &cfg);

    struct sigaction sa = {.sa_handler = request_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* a thread per connection: a request waits for its slot, and a stream
     * generates, on its own thread while the others go on */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG |
                     (ipv6 ? MHD_USE_IPv6 : 0);
    const struct sockaddr *addr = ipv6 ? (const struct sockaddr *)&v6 : (const struct sockaddr *)&v4;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)o->port, NULL, NULL, on_request, &api, MHD_OPTION_SOCK_ADDR, addr,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)CONNECTION_TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, NULL, MHD_OPTION_END);
    if (!d) cli_die("--port %d: cannot listen on %s (in use, or not an address of this machine)", o->port, host);
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = info ? info->port : o->port;
    char variants[512] = "";
    for (int v = 0; v < s.v.n; v++)
        snprintf(variants + strlen(variants), sizeof variants - strlen(variants), "%s%s", v ? "," : "", s.v.labels[v]);
    fprintf(stderr,
            "serve: %s (%s, %d cells, %d slot%s%s of %d thread%s, queue %d) listening on http://%s%s%s:%d "
            "(Ctrl-C stops)\n",
            cfg.model_id, variants, s.n_ctx, o->slots, o->slots == 1 ? "" : "s", s.v.n > 1 ? " per variant" : "",
            api.threads, api.threads == 1 ? "" : "s", o->queue, ipv6 ? "[" : "", host, ipv6 ? "]" : "", port);
    while (!stop_requested) {
        struct timespec tick = {0, 50 * 1000 * 1000};
        nanosleep(&tick, NULL);
    }
    /* requests waiting for a slot give up, so stopping waits only for those running */
    serve_api_stop(&api);
    MHD_stop_daemon(d);
    fprintf(stderr, "serve: stopped (%s)\n", stop_requested == SIGINT ? "SIGINT" : "SIGTERM");
    serve_api_free(&api);
    for (int i = 0; i < n_slots; i++) context_free(&ctxs[i]);
    free(ctxs);
    if (template) {
        chat_format_free(&chat);
        jinja_free(template);
    }
    if (kwargs) json_free(&kwargs_doc);
    setup_close(&s);
    return EXIT_SUCCESS;
}
#endif
