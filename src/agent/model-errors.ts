// The model provider's failures as ModelErrors, with messages an operator can act on: what the
// SDK throws for a failed model call (classifyModelError) and a refusal for length that compacting
// could not answer (overflowError). Used by the agent's turn (loop.ts).

import { AISDKError, APICallError, type LanguageModel, RetryError } from 'ai';
import { ExternalError } from '../errors.ts';
import { parseRetryAfter } from '../retry-after.ts';
import { maskKeyShapes } from '../secrets/scrub.ts';
import { oneLine } from '../text.ts';
import type { Conversation } from './conversation.ts';
import { describeModel } from './models.ts';

/** A failure of the model provider; `transient` says whether a later retry can help. */
export class ModelError extends ExternalError {
  readonly status: number | undefined;
  constructor(
    message: string,
    opts: { transient: boolean; status?: number; retryAfterSeconds?: number; cause?: unknown },
  ) {
    super('model', message, opts);
    this.name = 'ModelError';
    this.status = opts.status;
  }
}

/** A refusal for length that compacting could not answer, said so the operator can act. */
export function overflowError(
  error: unknown,
  model: LanguageModel,
  conversation: Conversation,
): ModelError {
  const { id } = describeModel(model);
  return new ModelError(
    `model '${id}' refused the request as longer than its context window ` +
      `(${conversation.policy.windowTokens} tokens as Errand knows it), even after compacting the ` +
      `conversation: ${providerMessage(RetryError.isInstance(error) ? error.lastError : error)}; ` +
      "set the model's contextTokens in ERRAND_MODEL_CATALOG if it is smaller, or ask for a smaller step",
    { transient: false, status: 400, cause: error },
  );
}

/**
 * Maps what the SDK throws for a failed model call to a ModelError with a message an operator
 * can act on. Provider messages are quoted only where they cannot echo a credential.
 */
export function classifyModelError(error: unknown, model: LanguageModel): unknown {
  const { id, credentialHint } = describeModel(model);
  let cause = error;
  let attempts = 1;
  if (RetryError.isInstance(error)) {
    cause = error.lastError;
    attempts = error.errors.length;
  }
  const tries = attempts > 1 ? ` after ${attempts} attempts` : '';
  const status = statusOf(cause);
  const opts = { status, cause: error };

  if (status === 401 || status === 403) {
    const check = credentialHint ? `check ${credentialHint}` : "check the provider's API key";
    return new ModelError(
      `the model provider refused the credentials (${status}) for model '${id}'; ${check}`,
      { transient: false, ...opts },
    );
  }
  if (status === 404) {
    return new ModelError(
      `model '${id}' not found at the provider (404); check the model id and the provider's base URL`,
      { transient: false, ...opts },
    );
  }
  if (status === 429) {
    const retryAfterSeconds = retryAfter(cause);
    return new ModelError(
      `the model provider rate-limited model '${id}' (429)${tries}; the turn can be retried later`,
      { transient: true, ...opts, ...(retryAfterSeconds !== undefined && { retryAfterSeconds }) },
    );
  }
  if (status !== undefined && (status >= 500 || status === 408 || status === 409)) {
    return new ModelError(
      `the model provider failed (${status}) for model '${id}'${tries}; the turn can be retried later`,
      { transient: true, ...opts },
    );
  }
  if (status !== undefined) {
    return new ModelError(
      `the model provider rejected the request for model '${id}' (${status}): ${providerMessage(cause)}`,
      { transient: false, ...opts },
    );
  }
  if (APICallError.isInstance(cause) || isRetryableFlagged(cause)) {
    // No status: the connection failed or a stream broke off.
    return new ModelError(
      `could not get an answer from the model provider for model '${id}'${tries}: ${providerMessage(cause)}`,
      { transient: true, ...opts },
    );
  }
  if (AISDKError.isInstance(cause) || isProviderStreamError(cause)) {
    return new ModelError(`model '${id}' failed: ${providerMessage(cause)}`, {
      transient: false,
      ...opts,
    });
  }
  return error;
}

function statusOf(error: unknown): number | undefined {
  if (APICallError.isInstance(error)) return error.statusCode;
  // Errors sent inside an event stream are plain objects with the same fields.
  if (typeof error === 'object' && error !== null && 'statusCode' in error) {
    return typeof error.statusCode === 'number' ? error.statusCode : undefined;
  }
  return undefined;
}

function isRetryableFlagged(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'isRetryable' in error
    ? error.isRetryable === true
    : false;
}

function isProviderStreamError(error: unknown): boolean {
  return typeof error === 'object' && error !== null && 'message' in error && 'type' in error;
}

function retryAfter(error: unknown): number | undefined {
  if (!APICallError.isInstance(error)) return undefined;
  const headers = error.responseHeaders ?? {};
  // OpenAI's own header, in milliseconds, is the more precise when both are sent.
  const ms = Number.parseFloat(headers['retry-after-ms'] ?? '');
  if (Number.isFinite(ms)) return Math.ceil(ms / 1000);
  return parseRetryAfter(headers['retry-after']);
}

// Key-shaped tokens are masked in case a provider echoes part of a key in a 4xx message.
function providerMessage(error: unknown): string {
  const message =
    typeof error === 'object' && error !== null && 'message' in error
      ? String(error.message)
      : String(error);
  return oneLine(maskKeyShapes(message), 300);
}
