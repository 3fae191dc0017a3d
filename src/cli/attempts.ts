// `errand job create --attempts N --agent ENGINE:MODEL …`: best-of-N (docs/eval.md) as the job
// API's `attempts` field. Only the shape is checked here; the count's range, an engine that
// cannot hold its model and a model the server cannot use are the service's to refuse.
import type { CreateJobInput } from '../client/index.ts';
import { ENGINE_NAMES } from '../records/project.ts';
import { wholeNumber } from './command.ts';
import { UsageError } from './errors.ts';

type Attempts = NonNullable<CreateJobInput['attempts']>;
type Agent = NonNullable<Attempts['agents']>[number];

const AGENT_FORMAT = `--agent must be ENGINE:MODEL, either part empty for the project's (codex:, :openai:gpt-5, claude-code:anthropic:claude-sonnet-4-5); ENGINE is one of ${ENGINE_NAMES.join(', ')}`;

/**
 * One `--agent`: the engine before the first colon, the model (provider:model, itself with a
 * colon) after it. A bare engine name is the engine alone.
 */
function agentOf(text: string): Agent {
  const value = text.trim();
  const colon = value.indexOf(':');
  const engine = colon < 0 ? value : value.slice(0, colon);
  const model = colon < 0 ? '' : value.slice(colon + 1);
  if (engine !== '' && !(ENGINE_NAMES as readonly string[]).includes(engine))
    throw new UsageError(`${AGENT_FORMAT} (got '${text}')`);
  if (engine === '' && model === '') throw new UsageError(`${AGENT_FORMAT} (got '${text}')`);
  return {
    ...(engine !== '' ? { engine: engine as Agent['engine'] } : {}),
    ...(model !== '' ? { model } : {}),
  };
}

/**
 * The create's `attempts` from `--attempts` and the `--agent`s, or undefined when neither is
 * given: agents without a count make one attempt each.
 */
export function attemptsOf(
  count: string | undefined,
  agents: readonly string[] | undefined,
): Attempts | undefined {
  const n = wholeNumber(count, 'attempts', 1);
  const given = (agents ?? []).map(agentOf);
  if (n === undefined && given.length === 0) return undefined;
  return { count: n ?? given.length, ...(given.length > 0 ? { agents: given } : {}) };
}
