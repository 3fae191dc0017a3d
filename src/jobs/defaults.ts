// The model a job uses when neither its project nor ERRAND_MODEL names one.
export const DEFAULT_MODEL_ID = 'anthropic:claude-sonnet-4-5';
