// Whether commits about to be pushed hold a secret: every object they add (commits, trees with
// their file names, blobs, binary ones too) read once from git and searched for each secret's
// forms in one pass, so that a turn never publishes a value it was given. Found is refused by
// the caller; this only says which secret.
import { join } from 'node:path';
import { GitError, invalidInput } from './errors.ts';
import { runGit } from './git.ts';
import type { WorkspaceConfig } from './types.ts';

/** A secret's name and the bytes of each form it is recognised in (each at least 8 bytes). */
export interface SecretNeedles {
  name: string;
  forms: readonly Buffer[];
}

const OBJECT_ID = /^[0-9a-f]{40}([0-9a-f]{24})?$/;
/** Every form is at least this long: an occurrence covers one whole aligned window of 4 bytes. */
const MIN_FORM_BYTES = 8;
const WINDOW = 4;

/**
 * The name of the first secret one of whose forms is in an object reachable from `head` and not
 * from `base` (what a push of `head` over `base` publishes); undefined when none is.
 */
export async function secretInNewObjects(
  cfg: WorkspaceConfig,
  input: {
    dir: string;
    base: string;
    head: string;
    secrets: readonly SecretNeedles[];
    signal?: AbortSignal;
  },
): Promise<string | undefined> {
  if (input.secrets.every((s) => s.forms.length === 0)) return undefined;
  for (const id of [input.base, input.head]) {
    if (!OBJECT_ID.test(id)) throw invalidInput(`not a commit id: ${JSON.stringify(id)}`);
  }
  const repo = { gitDir: join(input.dir, '.git'), workTree: input.dir, cwd: input.dir };
  const listed = await runGit(cfg, ['rev-list', '--objects', input.head, '--not', input.base], {
    ...repo,
    signal: input.signal,
    action: 'listing the objects to push',
  });
  const ids = listed.stdout
    .split('\n')
    .map((line) => line.split(' ', 1)[0] ?? '')
    .filter((id) => OBJECT_ID.test(id));
  if (ids.length === 0) return undefined;
  const finder = new NeedleFinder(input.secrets);
  const reader = new BatchReader(finder);
  await runGit(cfg, ['cat-file', '--batch'], {
    ...repo,
    signal: input.signal,
    input: `${ids.join('\n')}\n`,
    onStdout: (chunk) => reader.push(chunk),
    action: 'reading the objects to push',
  });
  reader.end(ids.length);
  return finder.found;
}

interface Needle {
  name: string;
  bytes: Buffer;
  /** Where in the needle the window of its table key starts. */
  offset: number;
}

/**
 * Searches a stream of bytes for many needles at once. Every needle is at least 8 bytes long,
 * so an occurrence covers exactly one window of 4 bytes at a position that is a multiple of 4,
 * starting 0 to 3 bytes into it: only those windows are looked up, and a hit is compared whole.
 */
export class NeedleFinder {
  readonly #table = new Map<number, Needle[]>();
  /** Bytes kept from one chunk for the next: what an occurrence that straddles them needs. */
  readonly #keep: number;
  #carry: Buffer = Buffer.alloc(0);
  found: string | undefined;

  constructor(secrets: readonly SecretNeedles[]) {
    let longest = 0;
    for (const { name, forms } of secrets) {
      for (const bytes of forms) {
        if (bytes.length < MIN_FORM_BYTES) throw new RangeError(`a form of ${name} is too short`);
        longest = Math.max(longest, bytes.length);
        for (let offset = 0; offset < WINDOW; offset++) {
          const key = bytes.readUInt32LE(offset);
          const list = this.#table.get(key) ?? [];
          list.push({ name, bytes, offset });
          this.#table.set(key, list);
        }
      }
    }
    this.#keep = Math.max(0, longest - 1);
  }

  /** A new object begins: nothing of the last one's end joins it. */
  start(): void {
    this.#carry = Buffer.alloc(0);
  }

  push(chunk: Buffer): void {
    if (this.found !== undefined) return;
    const data = this.#carry.length === 0 ? chunk : Buffer.concat([this.#carry, chunk]);
    for (let at = 0; at + WINDOW <= data.length; at += WINDOW) {
      const hits = this.#table.get(data.readUInt32LE(at));
      if (hits === undefined) continue;
      for (const { name, bytes, offset } of hits) {
        const start = at - offset;
        const end = start + bytes.length;
        if (start < 0 || end > data.length) continue;
        if (data.compare(bytes, 0, bytes.length, start, end) === 0) {
          this.found = name;
          return;
        }
      }
    }
    this.#carry = Buffer.from(data.subarray(Math.max(0, data.length - this.#keep)));
  }
}

/**
 * `git cat-file --batch` output as it streams: each object's header line (`<id> <type>
 * <size>`), its bytes given to the finder, and the line feed after them.
 */
class BatchReader {
  readonly #finder: NeedleFinder;
  #header: Buffer[] = [];
  /** Bytes of the current object still to come; -1 between objects. */
  #left = -1;
  #objects = 0;
  #problem: string | undefined;

  constructor(finder: NeedleFinder) {
    this.#finder = finder;
  }

  push(chunk: Buffer): void {
    let rest = chunk;
    while (rest.length > 0 && this.#problem === undefined) {
      if (this.#left > 0) {
        const part = rest.subarray(0, this.#left);
        this.#finder.push(part);
        this.#left -= part.length;
        rest = rest.subarray(part.length);
      } else if (this.#left === 0) {
        // The line feed that ends an object's bytes.
        rest = rest.subarray(1);
        this.#left = -1;
      } else {
        const newline = rest.indexOf(0x0a);
        if (newline === -1) {
          this.#header.push(rest);
          return;
        }
        this.#header.push(rest.subarray(0, newline));
        rest = rest.subarray(newline + 1);
        this.#startObject(Buffer.concat(this.#header).toString('utf8'));
        this.#header = [];
      }
    }
  }

  #startObject(header: string): void {
    const match = /^[0-9a-f]+ (commit|tree|blob|tag) (\d+)$/.exec(header);
    if (!match) {
      this.#problem = `git cat-file answered ${JSON.stringify(header.slice(0, 200))}`;
      return;
    }
    this.#objects += 1;
    this.#left = Number(match[2]);
    this.#finder.start();
  }

  /** Throws unless every object asked for was read whole. */
  end(expected: number): void {
    const problem =
      this.#problem ??
      (this.#objects !== expected || this.#left > 0
        ? `git cat-file gave ${this.#objects} of ${expected} objects`
        : undefined);
    if (problem)
      throw new GitError('failed', `the commits to push could not be read: ${problem}`, {
        transient: false,
      });
  }
}
