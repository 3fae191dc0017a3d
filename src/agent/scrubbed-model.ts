// The model as the agent's loop calls it, with every known secret value scrubbed from each
// request's prompt (system, user, assistant and tool messages): whatever a tool read (a file a
// setup command wrote, a command's output) or the user pasted, no model receives a value. The
// last of the scrubs; tool outputs and events are scrubbed where they are made too.
import { type LanguageModel, wrapLanguageModel } from 'ai';
import { scrubDeep } from '../secrets/scrub.ts';

export function scrubbedModel(
  model: LanguageModel,
  scrub: (text: string) => string,
): LanguageModel {
  if (typeof model === 'string') throw new TypeError('scrubbedModel needs a model, not an id');
  return wrapLanguageModel({
    model,
    middleware: {
      transformParams: async ({ params }) => ({
        ...params,
        prompt: scrubDeep(params.prompt, scrub),
      }),
    },
  });
}
