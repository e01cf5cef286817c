// exceljs, loaded when a workbook is first read or written. It is the heaviest of our
// dependencies to load (about a quarter of a second of CPU, a third of `vqb status`'s start), and
// most processes never touch a workbook: a worker writes the CSV and JSONL exports unless .xlsx is
// asked for, and `vqb status`, `vqb pause` or `vqb run` on a CSV never read one. Files name its
// types with `import type`; its code comes from here.
import type ExcelJS from 'exceljs';

let loading: Promise<typeof ExcelJS> | undefined;

/** The exceljs module, imported on the first call. */
export function loadExcel(): Promise<typeof ExcelJS> {
  loading ??= import('exceljs').then((m) => m.default);
  return loading;
}
