// A CSV or .xlsx uploaded as multipart/form-data, as browsers and generated clients send a file:
// its `file` part goes through the same reader as a text/csv or .xlsx body (readPlateUpload:
// metered, hashed, collected before anything is enqueued; a workbook told by the part's name,
// media type or zip magic bytes), and the other fields are the options such a body takes in its
// query string, checked by the same schema (strictly: an unknown field is an error).
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isVqbError } from '../errors.js';
import { collectBytes } from '../producers/xlsx.js';
import { CreateBatchFormFields, type CreateBatchQuery } from '../schemas/api.js';
import { bodyTooLarge, type CsvBody } from './csv-body.js';
import { ApiError } from './errors.js';
import { readPlateUpload } from './plate-upload.js';
import { validationError } from './validation.js';

export const FILE_FIELD = 'file';
const MAX_FIELDS = 20;
/** Largest option field, in bytes (a callback URL is the longest a form sends). */
export const MAX_FIELD_BYTES = 4_096;
/** Header lines a part may have (a browser sends two: Content-Disposition and Content-Type); more are dropped. */
const MAX_PART_HEADERS = 8;
/** Bytes of a part's headers kept (a browser's are a few hundred); the rest is dropped, counted by the meter. */
const MAX_PART_HEADER_BYTES = 8 * 1024;
/**
 * What a form may carry beyond its file: the fields, each part's headers and boundaries. The body
 * as a whole (preamble and epilogue included, which the parser would skip however long) is cut at
 * VQ_HTTP_BODY_LIMIT plus this.
 */
export const FORM_OVERHEAD_BYTES = 128 * 1024;

export interface CsvUpload {
  csv: CsvBody;
  options: CreateBatchQuery;
  /** The uploaded file's name, when the client gave one. */
  fileName?: string;
}

/**
 * Lets the routes of `app` read forms; only `uploadRoute` does, a form anywhere else is refused as
 * any other media type would be.
 */
export async function registerCsvUploads(
  app: FastifyInstance,
  options: { bodyLimit: number; uploadRoute: string },
): Promise<void> {
  // Passed through to the parser (busboy), which takes it; @fastify/multipart's types do not list it.
  const busboyOnly = { headerSize: MAX_PART_HEADER_BYTES };
  await app.register(multipart, {
    // Every part streams, fields too: the parser would read a field to its end (however long)
    // before handing it over, where a stream is refused as soon as it passes MAX_FIELD_BYTES.
    isPartAFile: () => true,
    // One byte over the limit, so readCsvBody's own count answers (413 PAYLOAD_TOO_LARGE) first.
    limits: {
      files: MAX_FIELDS + 1,
      fields: 0,
      parts: MAX_FIELDS + 1,
      fileSize: options.bodyLimit + 1,
      fieldNameSize: 100,
      headerPairs: MAX_PART_HEADERS,
      ...busboyOnly,
    },
  });
  app.addHook('preValidation', async (request) => {
    if (request.isMultipart() && !(request.method === 'POST' && request.routeOptions.url === options.uploadRoute)) {
      throw new ApiError(
        'UNSUPPORTED_MEDIA_TYPE',
        `only POST ${options.uploadRoute} takes multipart/form-data; send application/json`,
      );
    }
  });
}

/**
 * Reads the form: the options fields (any order, but `column` and `sheet` before the file) and the `file` part.
 * `blankFieldsAbsent`: an empty field counts as not sent (an HTML form sends every input, filled or not).
 */
export async function readCsvUpload(
  request: FastifyRequest,
  limits: { bodyLimit: number; maxPlates: number },
  options: {
    blankFieldsAbsent?: boolean;
    /**
     * A field that is not a batch option (the console's CSRF token): checked when the file part
     * arrives, before a byte of the file is read, then left out of the options.
     */
    control?: { field: string; check(value: string | undefined): void };
  } = {},
): Promise<CsvUpload> {
  const fields: Record<string, string> = Object.create(null) as Record<string, string>;
  let csv: CsvBody | undefined;
  let fileName: string | undefined;
  const read = async (): Promise<void> => {
    for await (const part of request.parts()) {
      if (part.type !== 'file') throw formError(`the part ${JSON.stringify(part.fieldname)} could not be read`);
      if (part.fieldname === FILE_FIELD) {
        if (csv !== undefined) throw formError(`the field ${JSON.stringify(FILE_FIELD)} is sent twice`);
        options.control?.check(fields[options.control.field]);
        const { column, sheet } = fields;
        csv = await readPlateUpload(part.file, part.filename || undefined, part.mimetype || undefined, {
          ...limits,
          ...(column !== undefined ? { column } : {}),
          ...(sheet !== undefined ? { sheet } : {}),
        });
        if (part.filename) fileName = part.filename;
        continue;
      }
      if (part.filename !== undefined)
        throw formError(`the file goes in the \`${FILE_FIELD}\` part, not ${JSON.stringify(part.fieldname)}`);
      if ((part.fieldname === 'column' || part.fieldname === 'sheet') && csv !== undefined) {
        throw formError(
          `send the \`${part.fieldname}\` field before the \`file\` part: the file is read as it arrives`,
        );
      }
      if (part.fieldname in fields) throw formError(`the field ${JSON.stringify(part.fieldname)} is sent twice`);
      const value = await fieldText(part.fieldname, part.file);
      if (options.blankFieldsAbsent && value.trim() === '') continue;
      fields[part.fieldname] = value;
    }
  };
  // read() pipes the request into the parser before the meter listens: no chunk is missed.
  const reading = read();
  const meter = meterForm(request, limits.bodyLimit);
  reading.catch(() => {}); // cut off by the meter, it settles (or not) after the answer
  try {
    await Promise.race([reading, meter.over]);
  } catch (err) {
    throw unreadable(err);
  } finally {
    meter.stop();
  }
  if (options.control) {
    if (csv === undefined) options.control.check(fields[options.control.field]);
    delete fields[options.control.field];
  }
  if (csv === undefined)
    throw formError(`no \`${FILE_FIELD}\` part: send the CSV or .xlsx as the form's \`${FILE_FIELD}\``);
  const parsed = CreateBatchFormFields.safeParse({ ...fields });
  if (!parsed.success) throw validationError('form', parsed.error);
  return { csv, options: parsed.data, ...(fileName !== undefined ? { fileName } : {}) };
}

/** A field's text, refused as soon as it passes MAX_FIELD_BYTES (the rest is never read). */
async function fieldText(name: string, stream: AsyncIterable<Buffer>): Promise<string> {
  const bytes = await collectBytes(stream, MAX_FIELD_BYTES, () =>
    formError(`the field ${JSON.stringify(name)} is too long (more than ${MAX_FIELD_BYTES} bytes)`),
  );
  return bytes.toString('utf8');
}

/**
 * Counts the form's bytes as they arrive, whatever the parser does with them: `over` rejects
 * (413 PAYLOAD_TOO_LARGE) as soon as more than the body limit and FORM_OVERHEAD_BYTES came, or at
 * once when Content-Length says so, and the rest is left unread (the answer closes the connection).
 */
function meterForm(request: FastifyRequest, bodyLimit: number): { over: Promise<never>; stop(): void } {
  const raw = request.raw;
  const max = bodyLimit + FORM_OVERHEAD_BYTES;
  let received = 0;
  let fail: (err: Error) => void = () => {};
  const over = new Promise<never>((_resolve, reject) => {
    fail = reject;
  });
  over.catch(() => {}); // settled by the race, or not at all
  const tooLarge = () => {
    // The parser gets nothing more, and nothing more is read: the answer closes the connection.
    raw.unpipe();
    raw.pause();
    fail(bodyTooLarge(bodyLimit));
  };
  const onData = (chunk: Buffer) => {
    received += chunk.length;
    if (received > max) tooLarge();
  };
  raw.on('data', onData);
  if (Number(request.headers['content-length']) > max) tooLarge();
  return { over, stop: () => raw.off('data', onData) };
}

function formError(message: string): ApiError {
  return new ApiError('BAD_FORM', message);
}

/** Our errors pass, and bugs; the form parser's (limits, a broken form) become ours. */
function unreadable(err: unknown): unknown {
  if (isVqbError(err) || err instanceof TypeError || err instanceof ReferenceError || !(err instanceof Error))
    return err;
  if ((err as { statusCode?: unknown }).statusCode === 413) {
    return new ApiError('PAYLOAD_TOO_LARGE', `the form has too many parts or too large a part: ${err.message}`, {
      cause: err,
    });
  }
  return new ApiError('BAD_FORM', `the multipart/form-data body could not be read: ${err.message}`, { cause: err });
}
