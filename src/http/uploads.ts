// A CSV or .xlsx uploaded as multipart/form-data, as browsers and generated clients send a file:
// its `file` part goes through the same reader as a text/csv or .xlsx body (readPlateUpload:
// metered, hashed, collected before anything is enqueued; a workbook told by the part's name,
// media type or zip magic bytes), and the other fields are the options such a body takes in its
// query string, checked by the same schema (strictly: an unknown field is an error).
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isVqbError } from '../errors.js';
import { CreateBatchFormFields, type CreateBatchQuery } from '../schemas/api.js';
import type { CsvBody } from './csv-body.js';
import { ApiError } from './errors.js';
import { readPlateUpload } from './plate-upload.js';
import { validationError } from './validation.js';

export const FILE_FIELD = 'file';
const MAX_FIELDS = 20;

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
  await app.register(multipart, {
    // `file` is the CSV even when a client sends it as a plain field (no file name): it streams.
    isPartAFile: (fieldName, _contentType, fileName) => fieldName === FILE_FIELD || fileName !== undefined,
    // One byte over the limit, so readCsvBody's own count answers (413 PAYLOAD_TOO_LARGE) first.
    limits: { files: 1, fields: MAX_FIELDS, parts: MAX_FIELDS + 1, fileSize: options.bodyLimit + 1, fieldSize: 4_096 },
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
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        if (part.fieldname !== FILE_FIELD)
          throw formError(`the file goes in the \`${FILE_FIELD}\` part, not ${JSON.stringify(part.fieldname)}`);
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
      if ((part.fieldname === 'column' || part.fieldname === 'sheet') && csv !== undefined) {
        throw formError(
          `send the \`${part.fieldname}\` field before the \`file\` part: the file is read as it arrives`,
        );
      }
      if (part.fieldname in fields) throw formError(`the field ${JSON.stringify(part.fieldname)} is sent twice`);
      if (part.valueTruncated) throw formError(`the field ${JSON.stringify(part.fieldname)} is too long`);
      const value = typeof part.value === 'string' ? part.value : String(part.value);
      if (options.blankFieldsAbsent && value.trim() === '') continue;
      fields[part.fieldname] = value;
    }
  } catch (err) {
    throw unreadable(err);
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
