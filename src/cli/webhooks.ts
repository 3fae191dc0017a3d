// `errand webhook …`: a project's webhook endpoints and their delivery log through the admin
// API. A signing secret is printed only in the answers that carry it (create, rotate), with a
// note that it will not be shown again.
import type { Delivery, UpdateWebhookInput, Webhook, WebhookWithSecret } from '../client/index.ts';
import { ADMIN_NOTE, withAdminClient } from './api.ts';
import {
  boolFlag,
  COMMON_OPTIONS,
  defineCommand,
  type Family,
  print,
  type Values,
  wholeNumber,
} from './command.ts';
import { EXIT, UsageError } from './errors.ts';

const PROJECT = { project: { type: 'string', value: 'ID', required: true } } as const;
/** The endpoint's fields, as create and update take them. */
const FIELDS = {
  url: { type: 'string', value: 'URL' },
  events: { type: 'string', value: 'TYPE,…' },
  description: { type: 'string', value: 'D' },
  enabled: { type: 'string', value: 'true|false', either: 'enabled' },
  disabled: { type: 'boolean', either: 'enabled' },
} as const;

/** An endpoint on one line, for lists and after a change. */
function webhookLine(w: Webhook): string {
  return `${w.id}  ${w.url}  ${w.events.join(',')}  ${w.enabled ? 'enabled' : 'disabled'}${
    w.description ? `  ${w.description}` : ''
  }`;
}

function webhookDetails(w: Webhook): string {
  return [
    `${w.id} (project ${w.projectId})`,
    `  url:          ${w.url}`,
    `  events:       ${w.events.join(', ')}`,
    `  enabled:      ${w.enabled ? 'yes' : 'no'}`,
    `  description:  ${w.description ?? ''}`,
    ...(w.previousSecretExpiresAt
      ? [`  previous secret also signs until ${w.previousSecretExpiresAt}`]
      : []),
    `  created:      ${w.createdAt}`,
    `  updated:      ${w.updatedAt}`,
  ].join('\n');
}

/** The secret is in the API's answer this once: say so, since nothing can show it again. */
function secretText(w: WebhookWithSecret): string {
  return `signing secret (shown once, it will not be shown again; store it where the receiver verifies signatures):\n  ${w.secret}`;
}

function deliveryLine(d: Delivery): string {
  const last = d.attempts.at(-1);
  const outcome = !last
    ? 'not tried yet'
    : last.status !== null
      ? `last status ${last.status}`
      : `last: no answer${last.error ? ` (${last.error})` : ''}`;
  return `${d.id}  ${d.type}  ${d.jobId}  ${d.state}  attempts ${d.attempts.length}  ${outcome}  ${d.createdAt}`;
}

/** The endpoint fields given as flags, as the admin API's body. */
function webhookFields(values: Values<typeof FIELDS>): UpdateWebhookInput {
  const body: UpdateWebhookInput = {};
  if (values.url !== undefined) body.url = values.url;
  if (values.events !== undefined) {
    // The server checks the names, so the list of valid ones lives in one place.
    body.events = values.events
      .split(',')
      .map((e) => e.trim())
      .filter((e) => e !== '');
  }
  // An empty description removes it.
  if (values.description !== undefined) body.description = values.description || null;
  const enabled = boolFlag(values.enabled, 'enabled');
  if (enabled !== undefined) body.enabled = enabled;
  if (values.disabled) body.enabled = false;
  return body;
}

const create = defineCommand({
  name: 'webhook create',
  options: { ...PROJECT, ...FIELDS, url: { ...FIELDS.url, required: true }, ...COMMON_OPTIONS },
  summary:
    "add an endpoint for the project's job events (all types unless --events names some); prints its signing secret, shown once",
  async run({ values, io }) {
    const body = { ...webhookFields(values), url: values.url };
    const created = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.createWebhook(body),
      values.project,
    );
    print(
      io,
      values.json,
      created,
      `created webhook ${webhookLine(created)}\n${secretText(created)}`,
    );
    return EXIT.ok;
  },
});

const list = defineCommand({
  name: 'webhook list',
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary: "the project's endpoints",
  async run({ values, io }) {
    const webhooks = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.listWebhooks(),
      values.project,
    );
    const text = webhooks.length === 0 ? 'no webhooks' : webhooks.map(webhookLine).join('\n');
    print(io, values.json, webhooks, text);
    return EXIT.ok;
  },
});

const get = defineCommand({
  name: 'webhook get',
  args: ['ID'],
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary: 'one endpoint, without its secret',
  async run({ values, args: [id = ''], io }) {
    const webhook = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.getWebhook(id),
      values.project,
    );
    print(io, values.json, webhook, webhookDetails(webhook));
    return EXIT.ok;
  },
});

const update = defineCommand({
  name: 'webhook update',
  args: ['ID'],
  options: { ...PROJECT, ...FIELDS, ...COMMON_OPTIONS },
  summary: 'change what is given',
  async run({ values, args: [id = ''], io }) {
    const body = webhookFields(values);
    if (Object.keys(body).length === 0) {
      throw new UsageError(
        'nothing to change: give --url, --events, --description, --enabled or --disabled',
      );
    }
    const webhook = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.updateWebhook(id, body),
      values.project,
    );
    print(io, values.json, webhook, `updated webhook ${webhookLine(webhook)}`);
    return EXIT.ok;
  },
});

const remove = defineCommand({
  name: 'webhook delete',
  args: ['ID'],
  options: { ...PROJECT, ...COMMON_OPTIONS },
  summary: 'delete the endpoint and its delivery log',
  async run({ values, args: [id = ''], io }) {
    await withAdminClient(io, values['data-dir'], (c) => c.deleteWebhook(id), values.project);
    print(io, values.json, { id, deleted: true }, `deleted webhook ${id}`);
    return EXIT.ok;
  },
});

const rotate = defineCommand({
  name: 'webhook rotate',
  args: ['ID'],
  options: { ...PROJECT, 'overlap-hours': { type: 'string', value: 'N' }, ...COMMON_OPTIONS },
  summary:
    'a new signing secret, shown once; the previous one also signs for --overlap-hours (default 24)',
  async run({ values, args: [id = ''], io }) {
    const hours = wholeNumber(values['overlap-hours'], 'overlap-hours') ?? 24;
    const rotated = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.rotateWebhookSecret(id, { overlapSeconds: hours * 3600 }),
      values.project,
    );
    const previous = rotated.previousSecretExpiresAt
      ? `the previous secret also signs until ${rotated.previousSecretExpiresAt}`
      : 'the previous secret no longer signs';
    print(
      io,
      values.json,
      rotated,
      `rotated the secret of webhook ${rotated.id}; ${previous}\n${secretText(rotated)}`,
    );
    return EXIT.ok;
  },
});

const deliveries = defineCommand({
  name: 'webhook deliveries',
  args: ['ID'],
  options: {
    ...PROJECT,
    limit: { type: 'string', value: 'N' },
    cursor: { type: 'string', value: 'C' },
    ...COMMON_OPTIONS,
  },
  summary: 'the delivery log, newest first, a page at a time',
  async run({ values, args: [id = ''], io }) {
    const limit = wholeNumber(values.limit, 'limit');
    const page = await withAdminClient(
      io,
      values['data-dir'],
      (c) =>
        c.listDeliveries(id, {
          ...(limit !== undefined ? { limit } : {}),
          ...(values.cursor !== undefined ? { cursor: values.cursor } : {}),
        }),
      values.project,
    );
    const lines =
      page.deliveries.length === 0 ? ['no deliveries'] : page.deliveries.map(deliveryLine);
    if (page.nextCursor) lines.push(`older deliveries: --cursor ${page.nextCursor}`);
    print(io, values.json, page, lines.join('\n'));
    return EXIT.ok;
  },
});

const redeliver = defineCommand({
  name: 'webhook redeliver',
  args: ['DELIVERY_ID'],
  options: {
    webhook: { type: 'string', value: 'ID', required: true },
    ...PROJECT,
    ...COMMON_OPTIONS,
  },
  summary: 'send a delivered or failed delivery again',
  async run({ values, args: [deliveryId = ''], io }) {
    const delivery = await withAdminClient(
      io,
      values['data-dir'],
      (c) => c.redeliver(values.webhook, deliveryId),
      values.project,
    );
    print(io, values.json, delivery, `delivery ${delivery.id} queued again (${delivery.state})`);
    return EXIT.ok;
  },
});

export const webhooks: Family = {
  name: 'webhook',
  commands: [create, list, get, update, remove, rotate, deliveries, redeliver],
  subcommandPages: false,
  collapsed: true,
  outro: ADMIN_NOTE,
};
