// How secrets are kept out of text that is stored or shown (events, transcripts, error
// messages): the known values removed, longest first, and what only looks like a credential
// masked. The one scrubber of the turn pipeline, the agent's tools and model errors, the forges'
// HTTP client and git's messages. A second line of defence: secrets are kept out of events and
// errors in the first place, and the logger redacts its own fields (log.ts).

export interface ScrubOptions {
  /** What each secret becomes; `[redacted]` unless the caller's readers expect another mark. */
  mask?: string;
  /** Shorter values are left alone: they would match ordinary text. */
  minLength?: number;
}

/**
 * A function that removes every one of `secrets` from a text, longest first so that no part of
 * a longer secret (a header line around its token) is left behind.
 */
export function secretScrubber(
  secrets: readonly string[],
  { mask = '[redacted]', minLength = 8 }: ScrubOptions = {},
): (text: string) => string {
  const ordered = [...new Set(secrets)]
    .filter((secret) => secret.length >= minLength)
    .sort((a, b) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const secret of ordered) if (out.includes(secret)) out = out.split(secret).join(mask);
    return out;
  };
}

/** Removes known secret values (model keys, tokens) from text before it is stored or shown. */
export function scrubSecrets(
  text: string,
  secrets: readonly string[],
  options?: ScrubOptions,
): string {
  return secretScrubber(secrets, options)(text);
}

/**
 * Every form in which the secret of an HTTP header line can show up in text: the whole line,
 * its value (`Basic …`), the bare credential after the scheme (the base64), and for Basic the
 * decoded `user:password` and the password. Longest first, so that scrubbing in this order
 * never leaves part of a longer form behind.
 */
export function headerSecrets(header: string): string[] {
  const forms = new Set<string>([header.trim()]);
  const colon = header.indexOf(':');
  const value = colon === -1 ? '' : header.slice(colon + 1).trim();
  forms.add(value);
  const [scheme, credential] = /^(\S+)\s+(\S.*)$/.exec(value)?.slice(1) ?? [];
  if (credential) forms.add(credential);
  if (credential && scheme?.toLowerCase() === 'basic') {
    const decoded = Buffer.from(credential, 'base64').toString('utf8');
    forms.add(decoded);
    const separator = decoded.indexOf(':');
    if (separator !== -1) forms.add(decoded.slice(separator + 1));
  }
  return [...forms].filter((form) => form.length >= 4).sort((a, b) => b.length - a.length);
}

/**
 * Masks credentials no list names that a program may echo: the user info of URLs, and
 * `Authorization`, `Proxy-Authorization` and `Cookie` header lines.
 */
export function maskCredentials(text: string, mask: string): string {
  const out = text.replace(/(\b[a-z][a-z0-9+.-]*:\/\/)[^/\s@]*@/gi, `$1${mask}@`);
  return out.replace(/\b((?:Proxy-)?Authorization|Cookie):[^\r\n]*/gi, `$1: ${mask}`);
}

/** Masks key-shaped tokens (`sk-…`, `AIza…`) a model provider may echo in an error message. */
export function maskKeyShapes(text: string): string {
  return text.replace(/\b(sk|pk|key|AIza)[-_A-Za-z0-9*.]{8,}/g, '[redacted]');
}
