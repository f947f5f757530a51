export declare const SCHEMA_FILE: string;
export declare function backendOpenApiDocument(): Promise<Record<string, unknown>>;
export declare function generateApiSchema(): Promise<string>;
