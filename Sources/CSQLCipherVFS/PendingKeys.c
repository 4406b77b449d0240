// Keys registered for databases SQLite opens later (VACUUM INTO targets).

#include "Internal.h"
#include <libgen.h>
#include <limits.h>

typedef struct PendingKey {
    struct PendingKey *next;
    char *path;                 // canonical_path of the registered path
    Codec *codec;               // NULL: explicitly plain
} PendingKey;

static pthread_mutex_t pendingMutex = PTHREAD_MUTEX_INITIALIZER;
static PendingKey *pendingHead = NULL;

/// `path` with symbolic links resolved in every component, including a
/// last component that is a dangling link, as SQLite's unix VFS resolves
/// the names it opens (and as macOS resolves /var to /private/var). The
/// file itself may not exist yet. Malloc'd; NULL on failure.
HIDDEN char *canonical_path(const char *path) {
    char current[PATH_MAX];
    if (strlen(path) >= sizeof(current)) return NULL;
    strcpy(current, path);
    for (int depth = 0; depth < 40; depth++) {
        char *resolved = realpath(current, NULL);
        if (resolved) return resolved;
        // Missing: resolve the directory, and follow the last component if
        // it is a dangling symbolic link.
        char directoryBuffer[PATH_MAX], baseBuffer[PATH_MAX];
        strcpy(directoryBuffer, current);
        strcpy(baseBuffer, current);
        char *directory = realpath(dirname(directoryBuffer), NULL);
        if (!directory) return NULL;
        const char *base = basename(baseBuffer);
        char joined[PATH_MAX];
        int length = snprintf(joined, sizeof(joined), "%s/%s", strcmp(directory, "/") == 0 ? "" : directory, base);
        free(directory);
        if (length < 0 || length >= (int)sizeof(joined)) return NULL;
        char target[PATH_MAX];
        ssize_t targetLength = readlink(joined, target, sizeof(target) - 1);
        if (targetLength < 0) return strdup(joined);
        target[targetLength] = '\0';
        if (target[0] == '/') {
            strcpy(current, target);
        } else {
            char *slash = strrchr(joined, '/');
            *slash = '\0';
            if (snprintf(current, sizeof(current), "%s/%s", joined, target) >= (int)sizeof(current)) return NULL;
        }
    }
    return NULL;
}

int grdbcipher_set_pending_key(const char *path, const void *key, int nKey, int version, int kdfIterations, int pageSize) {
    if (!path) return SQLITE_MISUSE;
    PendingKey *pending = calloc(1, sizeof(PendingKey));
    if (!pending) return SQLITE_NOMEM;
    pending->path = canonical_path(path);
    if (!pending->path) { free(pending); return SQLITE_CANTOPEN; }
    if (key) {
        pending->codec = codec_new(key, nKey, version, kdfIterations);
        if (!pending->codec || (pageSize && codec_set_page_size(pending->codec, pageSize) != SQLITE_OK)) {
            codec_free(pending->codec);
            free(pending->path);
            free(pending);
            return SQLITE_MISUSE;
        }
    }
    pthread_mutex_lock(&pendingMutex);
    pending->next = pendingHead;
    pendingHead = pending;
    pthread_mutex_unlock(&pendingMutex);
    return SQLITE_OK;
}

/// Removes the newest entry of `path` (canonical) from the list, or NULL.
static PendingKey *remove_pending(const char *path) {
    PendingKey *found = NULL;
    pthread_mutex_lock(&pendingMutex);
    for (PendingKey **link = &pendingHead; *link; link = &(*link)->next) {
        if (strcmp((*link)->path, path) == 0) {
            found = *link;
            *link = found->next;
            break;
        }
    }
    pthread_mutex_unlock(&pendingMutex);
    return found;
}

/// Takes the pending key of `path`, if any: 1 and the codec (maybe NULL).
HIDDEN int take_pending_key(const char *path, Codec **codec) {
    char *canonical = canonical_path(path);
    if (!canonical) return 0;
    PendingKey *pending = remove_pending(canonical);
    free(canonical);
    if (!pending) return 0;
    *codec = pending->codec;
    free(pending->path);
    free(pending);
    return 1;
}

void grdbcipher_clear_pending_key(const char *path) {
    char *canonical = path ? canonical_path(path) : NULL;
    if (!canonical) return;
    PendingKey *pending;
    while ((pending = remove_pending(canonical))) {
        codec_free(pending->codec);
        free(pending->path);
        free(pending);
    }
    free(canonical);
}
