"""The part of include/clinformer.h that the Python package binds.

cffi compiles this against the real header (API mode), so every struct
layout and enum value below is checked by the C compiler: a field that
moved or changed type fails the build instead of corrupting memory.
"""

CDEF = r"""
/* errors */
typedef enum clf_status {
    CLF_OK, CLF_EINVALID_ARGUMENT, CLF_ENULL_ARGUMENT, CLF_EBAD_SIZE,
    CLF_ESIZE_OVERFLOW, CLF_ESEQ_TOO_LONG, CLF_EK_TOO_LARGE,
    CLF_ESHAPE_MISMATCH, CLF_EBAD_ENUM, CLF_EWEIGHT_UNSET, CLF_EWEIGHT_UNUSED,
    CLF_ENO_DEVICE, CLF_EDEVICE_NOT_FOUND, CLF_ENO_MEMORY, CLF_ETOO_LARGE,
    CLF_EBUFFER_TOO_SMALL, CLF_EWRONG_CONTEXT, CLF_EUNSUPPORTED, CLF_EIO,
    CLF_EFORMAT, CLF_ENOT_FOUND, CLF_EDTYPE, CLF_ESHARD_ABORTED,
    CLF_EOUT_OF_BOUNDS, ...
} clf_status;
const char *clf_strerror(int status);
const char *clf_status_name(int status);
const char *clf_last_error(void);
const char *clf_error_message(int status);
const char *clf_version(void);

/* devices */
typedef struct clf_device_info {
    unsigned index;
    unsigned platform_index;
    char platform[128];
    char name[128];
    char vendor[128];
    char driver[64];
    char version[64];
    char c_version[64];
    int is_gpu;
    int is_cpu;
    unsigned compute_units;
    unsigned max_clock_mhz;
    unsigned long long global_mem;
    unsigned long long max_alloc;
    unsigned long long local_mem;
    int fp16;
    int fp64;
    char stable_name[64];
    ...;
} clf_device_info;

int clf_devices_list(clf_device_info *infos, size_t cap, size_t *count);

/* contexts */
typedef struct clf_context clf_context;
#define CLF_CONTEXT_PROFILING ...
int clf_context_create_ex(clf_context **out, const char *selector,
                          unsigned flags);
void clf_context_destroy(clf_context *ctx);
int clf_context_build(clf_context *ctx);
int clf_context_finish(clf_context *ctx);
int clf_context_device_info(const clf_context *ctx, clf_device_info *out);
const char *clf_context_build_log(const clf_context *ctx);
const char *clf_context_kernel_choices(clf_context *ctx);
const char *clf_context_warnings(const clf_context *ctx);

/* attention */
typedef enum clf_sharing {
    CLF_SHARE_HEADWISE, CLF_SHARE_PER_HEAD, CLF_SHARE_KEY_VALUE, ...
} clf_sharing;
typedef enum clf_mode { CLF_MODE_LINFORMER, CLF_MODE_FULL, ... } clf_mode;
typedef enum clf_precision {
    CLF_PRECISION_FLOAT, CLF_PRECISION_HALF, ...
} clf_precision;

const char *clf_precision_name(clf_precision precision);
int clf_precision_parse(const char *name, clf_precision *out);
typedef enum clf_compression {
    CLF_COMPRESS_LINEAR, CLF_COMPRESS_MEAN, CLF_COMPRESS_MAX,
    CLF_COMPRESS_CONV, ...
} clf_compression;

typedef struct clf_attention_desc {
    size_t d_model;
    size_t heads;
    size_t head_dim;
    size_t max_seq_len;
    size_t k;
    clf_sharing sharing;
    int share_kv;
    int one_kv_head;
    int bias_q, bias_k, bias_v, bias_out;
    int compressed_bias;
    size_t causal_block;
    clf_precision precision;
    int bias_proj;
    clf_compression compression;
    int slot_mask;
    ...;
} clf_attention_desc;

typedef enum clf_weight {
    CLF_WEIGHT_Q, CLF_WEIGHT_K, CLF_WEIGHT_V, CLF_WEIGHT_OUT,
    CLF_BIAS_Q, CLF_BIAS_K, CLF_BIAS_V, CLF_BIAS_OUT,
    CLF_PROJ_E, CLF_PROJ_F, CLF_BIAS_E, CLF_BIAS_F, CLF_WEIGHT_COUNT, ...
} clf_weight;

const char *clf_weight_name(clf_weight which);

typedef struct clf_attention clf_attention;
int clf_attention_create(clf_attention **out, clf_context *ctx,
                         const clf_attention_desc *desc);
void clf_attention_destroy(clf_attention *att);
int clf_attention_weight_size(const clf_attention *att, clf_weight which,
                              size_t *count);
int clf_attention_set_weight(clf_attention *att, clf_weight which,
                             const float *data, size_t count);
int clf_attention_set_mode(clf_attention *att, clf_mode mode);
int clf_attention_device_bytes(const clf_attention *att, size_t *bytes);

typedef struct clf_forward_opts {
    const unsigned *lengths;
    const unsigned char *key_mask;
    int causal;
    ...;
} clf_forward_opts;

int clf_attention_forward_ex(clf_attention *att, const float *x, size_t batch,
                             size_t seq_len, float *y,
                             const clf_forward_opts *opts);

/* models */
typedef enum clf_layout {
    CLF_LAYOUT_AUTO, CLF_LAYOUT_LUCIDRAINS_ATTENTION,
    CLF_LAYOUT_LUCIDRAINS_ENCODER, CLF_LAYOUT_LUCIDRAINS_LM,
    CLF_LAYOUT_FAIRSEQ_ATTENTION, CLF_LAYOUT_FAIRSEQ_ENCODER_LAYER,
    CLF_LAYOUT_LINFORMER_PYTORCH_ATTENTION,
    CLF_LAYOUT_LINFORMER_PYTORCH_ENCODER, CLF_LAYOUT_LINFORMER_PYTORCH_LM,
    CLF_LAYOUT_SINGLE_HEAD_ATTENTION, ...
} clf_layout;

const char *clf_layout_name(clf_layout layout);
int clf_layout_parse(const char *name, clf_layout *out);

typedef struct clf_model_opts {
    clf_layout layout;
    size_t heads;
    size_t causal_block;
    int layerwise;
    int allow_unexpected;
    clf_precision precision;
    ...;
} clf_model_opts;

typedef struct clf_model_info {
    clf_layout layout;
    size_t d_model, heads, head_dim, max_seq_len, k;
    size_t layers;
    size_t ffn_dim;
    size_t vocab;
    int reversible, share_kv, one_kv_head, layerwise;
    int slot_mask;
    ...;
} clf_model_info;

typedef struct clf_model clf_model;
int clf_model_load(clf_model **out, clf_context *ctx, const char *path,
                   const clf_model_opts *opts);
void clf_model_destroy(clf_model *m);
size_t clf_model_unexpected_count(const clf_model *m);
const char *clf_model_unexpected_name(const clf_model *m, size_t index);
int clf_model_info_get(const clf_model *m, clf_model_info *out);
int clf_model_set_mode(clf_model *m, clf_mode mode);
int clf_model_get_mode(const clf_model *m, clf_mode *out);
int clf_model_forward(clf_model *m, const float *x, size_t batch,
                      size_t seq_len, float *y, const clf_forward_opts *opts);
int clf_model_forward_tokens(clf_model *m, const long long *ids, size_t batch,
                             size_t seq_len, float *logits,
                             const clf_forward_opts *opts);

/* streams */
typedef struct clf_stream clf_stream;
typedef struct clf_stream_info {
    size_t batch, position, max_seq_len;
    size_t block;
    size_t width_in;
    size_t width_out;
    size_t open_positions;
    size_t state_bytes;
    ...;
} clf_stream_info;
int clf_stream_create(clf_stream **out, clf_model *m, size_t batch);
int clf_stream_create_attention(clf_stream **out, clf_attention *att,
                                size_t batch);
void clf_stream_destroy(clf_stream *s);
int clf_stream_append(clf_stream *s, const float *x, size_t batch,
                      size_t count, const unsigned char *key_mask, float *y);
int clf_stream_append_tokens(clf_stream *s, const long long *ids,
                             size_t batch, size_t count,
                             const unsigned char *key_mask, float *logits);
int clf_stream_reset(clf_stream *s);
int clf_stream_info_get(const clf_stream *s, clf_stream_info *out);
"""

SOURCE = r"""
#define CL_TARGET_OPENCL_VERSION 120
#include <clinformer.h>
"""

MODULE = "clinformer._clinformer"
