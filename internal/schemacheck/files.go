package schemacheck

import (
	"os"
	"path/filepath"
)

// readDocuments reads the objects of a manifest file, or of every manifest file directly in a
// directory, in name order.
func readDocuments(name string) ([]Document, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		return SplitDocuments(name, data)
	}
	entries, err := os.ReadDir(name)
	if err != nil {
		return nil, err
	}
	var docs []Document
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); e.IsDir() || ext != ".yaml" && ext != ".yml" && ext != ".json" {
			continue
		}
		more, err := readDocuments(filepath.Join(name, e.Name()))
		if err != nil {
			return nil, err
		}
		docs = append(docs, more...)
	}
	return docs, nil
}

// ReadFiles reads the objects of every manifest file named, or of every manifest file directly in
// a directory named (in name order), in order.
func ReadFiles(names ...string) ([]Document, error) {
	var docs []Document
	for _, name := range names {
		more, err := readDocuments(name)
		if err != nil {
			return nil, err
		}
		docs = append(docs, more...)
	}
	return docs, nil
}
