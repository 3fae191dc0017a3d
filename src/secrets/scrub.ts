// How secrets are kept out of text that is stored or shown (events, transcripts, error
// messages, what a model reads): the known values removed, longest first, and what only looks
// like a credential masked. The one scrubber of the turn pipeline, the agent's tools and model
// calls, the model proxy, model errors, the forges' HTTP client and git's messages. A project's
// secrets are known in every form a program commonly prints them in (secretForms). A second
// line of defence: secrets are kept out of events and errors in the first place, and the
// logger redacts its own fields (log.ts).

/** Values shorter than this are never scrubbed (nor accepted as a project's secret). */
export const MIN_SECRET_CHARS = 8;

/** A secret value, masked as the options say, or with a mark of its own (a project secret's). */
export type ScrubSecret = string | { text: string; mask: string };

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
  secrets: readonly ScrubSecret[],
  { mask = '[redacted]', minLength = MIN_SECRET_CHARS }: ScrubOptions = {},
): (text: string) => string {
  const marks = new Map<string, string>();
  for (const secret of secrets) {
    const text = typeof secret === 'string' ? secret : secret.text;
    if (text.length < minLength || marks.has(text)) continue;
    marks.set(text, typeof secret === 'string' ? mask : secret.mask);
  }
  const ordered = [...marks].sort(([a], [b]) => b.length - a.length);
  return (text) => {
    let out = text;
    for (const [secret, mark] of ordered)
      if (out.includes(secret)) out = out.split(secret).join(mark);
    return out;
  };
}

/** Removes known secret values (model keys, tokens) from text before it is stored or shown. */
export function scrubSecrets(
  text: string,
  secrets: readonly ScrubSecret[],
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

/**
 * Every form in which a program commonly prints `value`, each at least MIN_SECRET_CHARS long:
 * as it is, escaped in a JSON string, URL-encoded (also with `+` for spaces), in hex, and in
 * base64 and base64url at each of the three byte offsets it can start at within longer encoded
 * data (only the characters that depend on the value alone). A program that transforms it
 * otherwise (reverses it, prints it a character at a time) is not recognised.
 */
export function secretForms(value: string): string[] {
  // Its encodings are longer, but a value this short would match ordinary text: none is known.
  if (value.length < MIN_SECRET_CHARS) return [];
  const bytes = Buffer.from(value, 'utf8');
  const forms = new Set<string>([
    value,
    JSON.stringify(value).slice(1, -1),
    encodeURIComponent(value),
    new URLSearchParams({ v: value }).toString().slice(2),
    bytes.toString('hex'),
    bytes.toString('hex').toUpperCase(),
  ]);
  for (let offset = 0; offset < 3; offset++) {
    const shifted = Buffer.concat([Buffer.alloc(offset), bytes]);
    // Characters wholly made of the value's bits: from the first after the padding's, to the
    // last before the bits of whatever follows.
    const start = Math.ceil((8 * offset) / 6);
    const end = Math.floor((8 * (offset + bytes.length)) / 6);
    for (const encoding of ['base64', 'base64url'] as const) {
      forms.add(shifted.toString(encoding).slice(start, end));
    }
  }
  return [...forms].filter((form) => form.length >= MIN_SECRET_CHARS);
}

/** A named secret's forms, each masked with its name: `[secret NPM_TOKEN]`. */
export function namedSecretForms(name: string, value: string): ScrubSecret[] {
  const mask = `[secret ${name}]`;
  return secretForms(value).map((text) => ({ text, mask }));
}

/**
 * `value` with `scrub` applied to every string in it, the keys of objects too: plain objects
 * and arrays are copied, anything else (a Uint8Array of a file) is kept as it is. For values
 * made of JSON, where scrubbing the JSON text could cut through its quoting.
 */
export function scrubDeep<T>(value: T, scrub: (text: string) => string): T {
  return walk(value, scrub) as T;
}

function walk(value: unknown, scrub: (text: string) => string): unknown {
  if (typeof value === 'string') return scrub(value);
  if (Array.isArray(value)) return value.map((item) => walk(item, scrub));
  if (typeof value !== 'object' || value === null) return value;
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    // Defined, not assigned: a key `__proto__` (JSON.parse makes one) stays a plain key.
    Object.defineProperty(out, scrub(key), {
      value: walk(item, scrub),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}
