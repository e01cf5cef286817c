// What every producer hands to ingest: one row of input, whether it came from a CSV file, a list
// of plates (library code, JSON over HTTP) or the drop folder.

export interface InputRow {
  /** 1-based data row; blank records are counted (and skipped), the header is not. */
  row: number;
  /** The plate cell as given (decoded, not trimmed). */
  input: string;
  /** Every other column by header name (colN, 1-based, without a header or past the header's width). */
  extra: Record<string, string>;
}
