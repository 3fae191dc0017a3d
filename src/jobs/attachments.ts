// Images given with a turn (docs/images.md): the field of create and message as clients write
// it, the limits, and the checks the job core makes once the model is known. Reading them
// (decoding, fetching, checking their bytes) is src/features/attachments/', reached through the
// context's AttachmentReader so that the routes below the features can use it.
import { z } from 'zod';
import type { AttachmentMediaType, ProjectRow } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import type { NewAttachment } from './accept.ts';
import type { JobsContext } from './context.ts';

/** Images one turn may carry. */
const MAX_ATTACHMENTS = 5;
/** Bytes of one image, decoded. */
export const MAX_ATTACHMENT_BYTES = 5 * 1024 * 1024;
/** Characters of one URL. */
const MAX_URL_CHARS = 2048;
/** Base64 characters of the largest image, with room for a `data:image/…;base64,` prefix. */
const MAX_DATA_CHARS = Math.ceil(MAX_ATTACHMENT_BYTES / 3) * 4 + 64;

/**
 * The body a create or a message may send, the prompt aside: five images as base64 at most,
 * JSON's quoting and a URL each (the API's bodyLimit for these two routes).
 */
export function turnBodyLimit(maxPromptChars: number): number {
  return maxPromptChars * 6 + 4096 + MAX_ATTACHMENTS * (MAX_DATA_CHARS + MAX_URL_CHARS + 64);
}

const inline = z
  .strictObject({
    data: z
      .string({ error: 'must be a base64 string' })
      .max(MAX_DATA_CHARS, {
        error: `is longer than the base64 of ${MAX_ATTACHMENT_BYTES} bytes, the most one image may have`,
      })
      .describe(
        'The image as base64 (standard or URL-safe alphabet), or as a data URL `data:image/png;base64,…`. Its type is read from its bytes.',
      ),
  })
  .describe('An image sent inline.');

const fetched = z
  .strictObject({
    url: z
      .string({ error: 'must be a string' })
      .max(MAX_URL_CHARS, { error: `must be at most ${MAX_URL_CHARS} characters` })
      .describe(
        'An https URL the service fetches the image from, once, when the request arrives (public addresses only, like webhooks).',
      ),
  })
  .describe('An image the service fetches.');

/** One image as a client gives it. */
export type AttachmentInput = z.infer<typeof inline> | z.infer<typeof fetched>;

/** The `attachments` field of create and message. */
export const attachmentsField = z
  .array(
    z.union([inline, fetched], { error: 'must be {"data": "<base64>"} or {"url": "https://…"}' }),
    {
      error: '"attachments" must be an array of images',
    },
  )
  .max(MAX_ATTACHMENTS, {
    error: (issue) =>
      `"attachments" has ${Array.isArray(issue.input) ? issue.input.length : 'too many'} images; the most a turn may carry is ${MAX_ATTACHMENTS}`,
  })
  .optional()
  .describe(
    `Images for the agent (PNG, JPEG, WebP or GIF), at most ${MAX_ATTACHMENTS}, each at most ${MAX_ATTACHMENT_BYTES / 1024 / 1024} MB: inline base64 or an https URL. The model must take images (docs/images.md).`,
  );

/**
 * Turns the images a client gave into what a turn stores: decoded or fetched, their type read
 * from their bytes. Refuses with AppError('bad_request') naming the image and why, having
 * stored nothing.
 */
export interface AttachmentReader {
  read(inputs: readonly AttachmentInput[] | undefined): Promise<NewAttachment[] | undefined>;
}

/**
 * Refuses images for a model that does not take them (Errand's own agent and the coding CLIs
 * alike: each gives them to the job's model, docs/images.md), and past what its vendor takes,
 * or, for an engine, what the model proxy forwards.
 */
export function checkImages(
  ctx: Pick<JobsContext, 'models'>,
  project: ProjectRow,
  model: string,
  attachments: readonly NewAttachment[] | undefined,
): void {
  if (!attachments || attachments.length === 0) return;
  if (!ctx.models.info(model).images)
    throw new AppError(
      'bad_request',
      `"attachments": model '${model}' does not take images; use one that does (e.g. anthropic:claude-sonnet-4-5 or openai:gpt-4.1), or, for a model the server does not know, set "images": true in its ERRAND_MODEL_CATALOG entry`,
    );
  // The vendor counts the base64 it is sent: refused here, not by the vendor once the turn runs.
  const encoded = attachments.map((image) => Math.ceil(image.data.length / 3) * 4);
  const total = encoded.reduce((sum, chars) => sum + chars, 0);
  const limits = VENDOR_LIMITS[model.slice(0, model.indexOf(':'))];
  if (limits) {
    const large = encoded.findIndex((chars) => chars > limits.imageBase64);
    if (large >= 0)
      throw new AppError(
        'bad_request',
        `"attachments[${large}]": ${attachments[large]?.data.length} bytes; ${model}'s vendor takes an image of at most ${limits.imageBase64} bytes as base64 (about ${Math.floor((limits.imageBase64 * 3) / 4 / 1024)} KB decoded): send it smaller`,
      );
    if (total > limits.imagesBase64)
      throw new AppError(
        'bad_request',
        `"attachments": ${attachments.length} images of ${total} bytes as base64 in all; ${model}'s vendor takes a request of at most ${limits.requestBytes} bytes: send fewer or smaller images`,
      );
  }
  if (project.engine !== 'errand' && total > ENGINE_IMAGES_BASE64)
    throw new AppError(
      'bad_request',
      `"attachments": ${attachments.length} images of ${total} bytes as base64 in all; the ${project.engine} engine's requests to its model are at most ${ENGINE_REQUEST_BYTES} bytes: send fewer or smaller images`,
    );
}

/**
 * An engine's request reaches the vendor through the model proxy, which reads at most 32 MB
 * (its MAX_BODY_BYTES, Anthropic's own limit): the images may use all but the conversation's
 * share, a quarter, as for Anthropic.
 */
const ENGINE_REQUEST_BYTES = 32 * 1024 * 1024;
const ENGINE_IMAGES_BASE64 = 24 * 1024 * 1024;

/**
 * What a vendor takes of a request's images, counted on their base64, where it is below what
 * Errand accepts (MAX_ATTACHMENT_BYTES decoded each): Anthropic's Messages API takes an image of
 * 5 MB of base64 and a request of 32 MB, of which the images may use all but the conversation's
 * share (a quarter, kept for it here).
 */
const VENDOR_LIMITS: Readonly<
  Record<string, { imageBase64: number; imagesBase64: number; requestBytes: number }>
> = {
  anthropic: {
    imageBase64: 5 * 1024 * 1024,
    imagesBase64: 24 * 1024 * 1024,
    requestBytes: 32 * 1024 * 1024,
  },
};

/** What a page shows of one image of a job: which turn, its place, type and size. */
export interface AttachmentSummary {
  seq: number;
  n: number;
  mediaType: AttachmentMediaType;
  size: number;
}

/** The images of a job's turns, in order, without their bytes. */
export async function listAttachments(
  ctx: Pick<JobsContext, 'db'>,
  jobId: string,
): Promise<AttachmentSummary[]> {
  return ctx.db
    .selectFrom('attachments')
    .select(['seq', 'n', 'media_type as mediaType', 'size'])
    .where('job_id', '=', jobId)
    .orderBy('seq')
    .orderBy('n')
    .execute();
}

/** One image of a job's turn with its bytes; undefined when there is none. */
export async function readAttachment(
  ctx: Pick<JobsContext, 'db'>,
  jobId: string,
  seq: number,
  n: number,
): Promise<{ mediaType: AttachmentMediaType; data: Buffer } | undefined> {
  return ctx.db
    .selectFrom('attachments')
    .select(['media_type as mediaType', 'data'])
    .where('job_id', '=', jobId)
    .where('seq', '=', seq)
    .where('n', '=', n)
    .executeTakeFirst();
}
