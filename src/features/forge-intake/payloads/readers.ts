// Each forge's payload reader by the forge's id, one file per forge beside this one (what its
// webhook requests mean: shared.ts says the interface). Plain git sends no webhooks.
import type { ForgeKind } from '../../../projects/forge.ts';
import { giteaPayloads } from './gitea.ts';
import { githubPayloads } from './github.ts';
import { gitlabPayloads } from './gitlab.ts';
import type { PayloadReader } from './shared.ts';

export const payloadReaders: ReadonlyMap<ForgeKind, PayloadReader> = new Map<
  ForgeKind,
  PayloadReader
>([
  ['github', githubPayloads],
  ['gitlab', gitlabPayloads],
  ['gitea', giteaPayloads],
]);
