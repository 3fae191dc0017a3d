// Which models take images (docs/images.md): a rule per provider over the model names its
// vendor publishes, for the vendors Errand calls directly. A local or OpenAI-compatible model
// takes none unless the operator's catalog file says `"images": true` (catalog.ts).

const rules: Readonly<Record<string, (model: string) => boolean>> = {
  // Every Claude from 3 on, but 3.5 Haiku (text only); Claude 2 and Instant take none.
  anthropic: (m) => /^claude-/.test(m) && !/^claude-(2|instant|3-5-haiku)/.test(m),
  // GPT-4o, 4.1, 4.5, 5 and later, 4 Turbo, and the o-series but its first minis.
  openai: (m) =>
    /^(gpt-4o|chatgpt-4o|gpt-4\.1|gpt-4\.5|gpt-4-turbo|gpt-[5-9]|o1|o3|o4)/.test(m) &&
    !/^(o1-mini|o1-preview|o3-mini)/.test(m),
  // Every Gemini but 1.0 Pro.
  google: (m) => /^gemini-/.test(m) && !/^gemini-1\.0-pro/.test(m),
};

/** Whether the model `provider:model` takes images, by its vendor's rule; false when unknown. */
export function takesImagesByName(modelId: string): boolean {
  const colon = modelId.indexOf(':');
  const rule = colon > 0 ? rules[modelId.slice(0, colon)] : undefined;
  return rule?.(modelId.slice(colon + 1)) ?? false;
}
