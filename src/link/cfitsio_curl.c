/* The six libcurl functions CFITSIO calls, for the tool linked with the
 * static CFITSIO (CMakeLists.txt, SKYFIND_STATIC_CFITSIO).
 *
 * CFITSIO's network drivers (http://, https://, ftps:// names) call
 * libcurl. Debian's shared libcfitsio links libcurl-gnutls and, through
 * it, some 30 libraries (GnuTLS, Kerberos, LDAP, SASL, ...): loading and
 * relocating them took 6.5 ms of the tool's 7.5 ms process start on the
 * build VM, paid by every process a script starts. Here each function opens
 * libcurl with dlopen the first time CFITSIO calls one (only for a URL), so
 * a run over local files never loads it, and a URL still works wherever a
 * libcurl is installed. Without one, the calls fail as libcurl reports an
 * initialisation failure (CURLE_FAILED_INIT, a NULL handle) and CFITSIO
 * says it cannot open the URL.
 *
 * curl_easy_setopt's third argument is a long, a pointer, a function
 * pointer or a curl_off_t: on the LP64 ABIs skyfind builds on (x86-64,
 * AArch64) each is one 64-bit integer-class argument, so it is forwarded
 * as one. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>

typedef void CURL;
typedef int CURLcode;
typedef int CURLoption;
#define SF_CURLE_FAILED_INIT 2

static struct {
    CURLcode (*global_init)(long);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    void (*easy_cleanup)(CURL *);
} sf_curl;
static pthread_once_t sf_curl_once = PTHREAD_ONCE_INIT;

static void sf_curl_open(void)
{
    static const char *const names[] = {"libcurl-gnutls.so.4", "libcurl.so.4",
                                        "libcurl-nss.so.4", "libcurl.so"};
    void *h = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&sf_curl.global_init = dlsym(h, "curl_global_init");
    *(void **)&sf_curl.global_cleanup = dlsym(h, "curl_global_cleanup");
    *(void **)&sf_curl.easy_init = dlsym(h, "curl_easy_init");
    *(void **)&sf_curl.easy_setopt = dlsym(h, "curl_easy_setopt");
    *(void **)&sf_curl.easy_perform = dlsym(h, "curl_easy_perform");
    *(void **)&sf_curl.easy_cleanup = dlsym(h, "curl_easy_cleanup");
}

static void sf_curl_load(void)
{
    (void)pthread_once(&sf_curl_once, sf_curl_open);
}

CURLcode curl_global_init(long flags)
{
    sf_curl_load();
    return sf_curl.global_init ? sf_curl.global_init(flags) : SF_CURLE_FAILED_INIT;
}

void curl_global_cleanup(void)
{
    sf_curl_load();
    if (sf_curl.global_cleanup)
        sf_curl.global_cleanup();
}

CURL *curl_easy_init(void)
{
    sf_curl_load();
    return sf_curl.easy_init ? sf_curl.easy_init() : NULL;
}

CURLcode curl_easy_setopt(CURL *h, CURLoption option, ...)
{
    va_list ap;
    void *arg;
    va_start(ap, option);
    arg = va_arg(ap, void *);
    va_end(ap);
    sf_curl_load();
    return sf_curl.easy_setopt ? sf_curl.easy_setopt(h, option, arg) : SF_CURLE_FAILED_INIT;
}

CURLcode curl_easy_perform(CURL *h)
{
    sf_curl_load();
    return sf_curl.easy_perform ? sf_curl.easy_perform(h) : SF_CURLE_FAILED_INIT;
}

void curl_easy_cleanup(CURL *h)
{
    sf_curl_load();
    if (sf_curl.easy_cleanup)
        sf_curl.easy_cleanup(h);
}
