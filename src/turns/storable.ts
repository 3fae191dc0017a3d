// What a turn stores of text it did not write: model output and command output made fit for
// PostgreSQL and git, and secrets removed from the environment's notes.
import type { SetupNote } from '../agent/prompt.ts';
import type { Emit } from '../events/catalog.ts';
import { type ScrubSecret, scrubDeep, scrubSecrets, secretScrubber } from '../secrets/scrub.ts';

/**
 * A turn's scrubbers: `secrets` (a list the turn may add the forge's to later) removed from
 * text and from values, and an emit that scrubs each event's data and keeps the log in the
 * order events happened (tools of one step, and attempts, run in parallel).
 */
export function turnScrubbing(
  secrets: readonly ScrubSecret[],
  record: Emit,
): { scrub: (text: string) => string; scrubbed: <T>(value: T) => T; emit: Emit } {
  const scrub = (text: string) => storable(scrubSecrets(text, secrets));
  // String by string: a value's JSON escaping cannot hide it, nor scrubbing break the JSON.
  const scrubbed = <T>(value: T): T =>
    scrubDeep(JSON.parse(JSON.stringify(value, storableStrings)) as T, secretScrubber(secrets));
  let chain: Promise<void> = Promise.resolve();
  const emit: Emit = (type, data) => {
    const clean = scrubbed(data);
    chain = chain.then(() => record(type, clean));
    return chain;
  };
  return { scrub, scrubbed, emit };
}

/** The note of the environment's commands with their output's secrets scrubbed. */
export function scrubNote(setup: SetupNote, secrets: readonly ScrubSecret[]): SetupNote {
  if (setup.restored !== true) {
    return { ...setup, outputTail: scrubSecrets(setup.outputTail, secrets) };
  }
  if (!setup.maintenance) return setup;
  const { maintenance } = setup;
  return {
    ...setup,
    maintenance: { ...maintenance, outputTail: scrubSecrets(maintenance.outputTail, secrets) },
  };
}

/**
 * Model output may contain U+0000, which neither PostgreSQL text and jsonb nor a git commit
 * message can hold: it is stored as U+FFFD. Files the model writes keep their bytes.
 */
export function storable(text: string): string {
  return text.replaceAll('\u0000', '\ufffd');
}

/** A JSON.stringify replacer: every string storable. */
function storableStrings(_key: string, value: unknown): unknown {
  return typeof value === 'string' ? storable(value) : value;
}
