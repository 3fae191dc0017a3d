// Images given with a turn (docs/images.md): the reader of a create's or a message's images
// (src/service.ts puts it in the context for the routes), and the dashboard's route that shows
// a turn's images to whoever may read its job.
export { configuredReader } from './read.ts';
